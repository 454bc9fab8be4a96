-- FTS5 keeps a deleted row's words in its older segments until they are merged; with
-- secure-delete it removes them at the delete (SQLite 3.42 or newer reads the index from
-- now on: pysqlite3's is). `optimize` merges away what earlier deletes left behind.
-- Deleted rows' pages are zeroed by the connections' `PRAGMA secure_delete` (db_sqlite.py).

INSERT INTO memory_fts (memory_fts, rank) VALUES ('secure-delete', 1);
INSERT INTO memory_fts (memory_fts) VALUES ('optimize');
