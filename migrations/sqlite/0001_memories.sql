-- Memories: one row per remembered fact, owned by a gateway API key (api_key_id).
-- `seq` is the stable integer row id that memory_fts (and later the vector table) point at:
-- an INTEGER PRIMARY KEY survives VACUUM, an implicit rowid does not. `id` is the public UUID.
-- Times are UTC ISO-8601 strings of one fixed width ("2026-01-31T12:00:00.000Z"), so that
-- comparing them as text compares the instants.
CREATE TABLE memories (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    api_key_id TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '',
    type TEXT NOT NULL CHECK (type IN ('factual', 'episodic', 'procedural', 'semantic')),
    key TEXT NOT NULL CHECK (length(key) > 0),
    content TEXT NOT NULL CHECK (length(content) > 0),
    metadata TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    expires_at TEXT,
    access_count INTEGER NOT NULL DEFAULT 0,
    last_accessed_at TEXT,
    -- 1 while the row has no current vector; the embedding backfill drains these.
    needs_reindex INTEGER NOT NULL DEFAULT 1,
    -- The owner as one exact FTS token, so that keyword search runs inside one owner's
    -- memories instead of ranking every owner's matches and filtering afterwards.
    fts_owner TEXT GENERATED ALWAYS AS (hex(api_key_id)) VIRTUAL
);

-- create() is an upsert on (owner, key): at most one row per key and owner.
CREATE UNIQUE INDEX memories_owner_key ON memories (api_key_id, key);
CREATE INDEX memories_owner_created ON memories (api_key_id, created_at);
CREATE INDEX memories_owner_session ON memories (api_key_id, session_id);
CREATE INDEX memories_owner_type ON memories (api_key_id, type);
CREATE INDEX memories_created ON memories (created_at);
CREATE INDEX memories_expires ON memories (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX memories_pending_vectors ON memories (created_at) WHERE needs_reindex = 1;

-- Keyword index over content and key (and the owner token), kept current by triggers from the
-- moment a row is written (the reference's FTS missed every row inserted after its migration:
-- bug B1).
CREATE VIRTUAL TABLE memory_fts USING fts5(
    content,
    key,
    fts_owner,
    content = 'memories',
    content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);

CREATE TRIGGER memory_fts_after_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memory_fts (rowid, content, key, fts_owner)
    VALUES (new.seq, new.content, new.key, new.fts_owner);
END;

CREATE TRIGGER memory_fts_after_delete AFTER DELETE ON memories BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key, fts_owner)
    VALUES ('delete', old.seq, old.content, old.key, old.fts_owner);
END;

-- Only a change of content, key or owner touches the index; access-count bumps and other
-- column updates do not (the reference re-indexed on every update: bug B3).
CREATE TRIGGER memory_fts_after_update AFTER UPDATE OF content, key, api_key_id ON memories
WHEN old.content IS NOT new.content OR old.key IS NOT new.key
    OR old.api_key_id IS NOT new.api_key_id BEGIN
    INSERT INTO memory_fts (memory_fts, rowid, content, key, fts_owner)
    VALUES ('delete', old.seq, old.content, old.key, old.fts_owner);
    INSERT INTO memory_fts (rowid, content, key, fts_owner)
    VALUES (new.seq, new.content, new.key, new.fts_owner);
END;
