-- End users inside a key (docs/scopes.md): a memory belongs to one user of its key, or to the
-- key as a whole (user_id ''); a memory of no key (api_key_id '') is global. `owner` is the
-- search partition every index keys by: the key alone for its shared memories (as before, so
-- no existing vector, FTS row or Qdrant point changes), the key and the user joined by U+001F
-- for a user's. A key is an upsert per (key, user).
ALTER TABLE memories ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE memories ADD COLUMN owner TEXT GENERATED ALWAYS AS (
    CASE WHEN user_id = '' THEN api_key_id ELSE api_key_id || char(31) || user_id END
) VIRTUAL;

-- The FTS owner token is now the partition's: hex(owner), equal to the old one for every key's
-- row (the index keeps them), and '00' for the global partition (no key), whose token was
-- empty and matched nothing (no id holds NUL, so no hex is '00'); the triggers that name it
-- are made again around it, and the global rows are indexed again under their token.
DROP TRIGGER memory_fts_after_insert;
DROP TRIGGER memory_fts_after_delete;
DROP TRIGGER memory_fts_after_update;
ALTER TABLE memories DROP COLUMN fts_owner;
ALTER TABLE memories ADD COLUMN fts_owner TEXT GENERATED ALWAYS AS (
    CASE WHEN owner = '' THEN '00' ELSE hex(owner) END
) VIRTUAL;

CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, search_stems, fts_owner)
    VALUES (new.seq, new.search_stems, new.fts_owner);
END;

CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_stems, fts_owner)
    VALUES ('delete', old.seq, old.search_stems, old.fts_owner);
END;

CREATE TRIGGER memory_fts_after_update AFTER UPDATE OF search_stems, api_key_id, user_id
ON memories
WHEN old.search_stems IS NOT new.search_stems OR old.owner IS NOT new.owner BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_stems, fts_owner)
    VALUES ('delete', old.seq, old.search_stems, old.fts_owner);
    INSERT INTO memory_fts (rowid, search_stems, fts_owner)
    VALUES (new.seq, new.search_stems, new.fts_owner);
END;

INSERT INTO memory_fts (memory_fts, rowid, search_stems, fts_owner)
SELECT 'delete', seq, search_stems, '' FROM memories WHERE api_key_id = '';
INSERT INTO memory_fts (rowid, search_stems, fts_owner)
SELECT seq, search_stems, fts_owner FROM memories WHERE api_key_id = '';

-- The change log's triggers again after the index's, in the order 0017 left them: with the
-- index's last, an INSERT on memories racing another connection's CREATE VIRTUAL TABLE (the
-- vector index's first build) failed now and then with "no such table: memories" (SQLite
-- 3.51.1: 10 of 40 fresh processes; in this order none of 40).
DROP TRIGGER memory_changes_after_insert;
DROP TRIGGER memory_changes_after_delete;
DROP TRIGGER memory_changes_after_update;
DROP TRIGGER memory_changes_pruned;

CREATE TRIGGER memory_changes_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (new.seq);
END;

CREATE TRIGGER memory_changes_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;

CREATE TRIGGER memory_changes_after_update AFTER UPDATE OF search_stems, api_key_id, user_id
ON memories
WHEN old.search_stems IS NOT new.search_stems OR old.owner IS NOT new.owner BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (new.seq);
END;

CREATE TRIGGER memory_changes_pruned AFTER INSERT ON memory_changes BEGIN
    DELETE FROM memory_changes WHERE id <= new.id - 100000;
END;

DROP INDEX memories_owner_key;
CREATE UNIQUE INDEX memories_owner_key ON memories (api_key_id, user_id, key);
CREATE INDEX memories_partition ON memories (owner, created_at);

-- A chat's texts carry their user to the facts extracted from them.
ALTER TABLE extraction_outbox ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
