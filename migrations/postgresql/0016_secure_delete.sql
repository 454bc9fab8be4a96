-- SQLite's keyword index gains FTS5's secure-delete (sqlite/0016). PostgreSQL's tsvector
-- lives in the row itself, so a deleted row's words go with it; `Database.scrub` runs
-- VACUUM after an erase (see docs/life-cycle.md for what VACUUM does and does not remove).
SELECT 1;
