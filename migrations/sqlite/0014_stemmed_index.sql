-- Keyword search on Snowball stems: memory_fts indexes `search_stems` (0013, filled) and the
-- owner token instead of the raw content and key, built whole from the filled column.

DROP TRIGGER memory_fts_after_insert;
DROP TRIGGER memory_fts_after_delete;
DROP TRIGGER memory_fts_after_update;
DROP TABLE memory_fts;

CREATE VIRTUAL TABLE memory_fts USING fts5(
    search_stems,
    fts_owner,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, search_stems, fts_owner)
    VALUES (new.seq, new.search_stems, new.fts_owner);
END;

CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_stems, fts_owner)
    VALUES ('delete', old.seq, old.search_stems, old.fts_owner);
END;

-- Only a change of the stems or the owner touches the index (not access counts).
CREATE TRIGGER memory_fts_after_update AFTER UPDATE OF search_stems, api_key_id ON memories
WHEN old.search_stems IS NOT new.search_stems OR old.api_key_id IS NOT new.api_key_id BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, search_stems, fts_owner)
    VALUES ('delete', old.seq, old.search_stems, old.fts_owner);
    INSERT INTO memory_fts (rowid, search_stems, fts_owner)
    VALUES (new.seq, new.search_stems, new.fts_owner);
END;

INSERT INTO memory_fts (memory_fts) VALUES ('rebuild');

