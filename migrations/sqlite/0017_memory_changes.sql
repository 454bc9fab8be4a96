-- Every change of what keyword search reads (a memory written, deleted, or its stems or owner
-- changed), by memory seq, in order: a process that holds a large key's keyword index in RAM
-- (omniroute/memory/search/keyword_cache.py) catches up from it, whichever process wrote.
-- Triggers write it, so no writer can forget; AUTOINCREMENT never reuses an id, so a reader
-- can tell when the pruned head has passed it. The newest 100,000 changes are kept.
CREATE TABLE memory_changes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    memory_seq INTEGER NOT NULL
);

CREATE TRIGGER memory_changes_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (new.seq);
END;

CREATE TRIGGER memory_changes_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (old.seq);
END;

CREATE TRIGGER memory_changes_after_update AFTER UPDATE OF search_stems, api_key_id ON memories
WHEN old.search_stems IS NOT new.search_stems OR old.api_key_id IS NOT new.api_key_id BEGIN
    INSERT INTO memory_changes (memory_seq) VALUES (new.seq);
END;

CREATE TRIGGER memory_changes_pruned AFTER INSERT ON memory_changes BEGIN
    DELETE FROM memory_changes WHERE id <= new.id - 100000;
END;
