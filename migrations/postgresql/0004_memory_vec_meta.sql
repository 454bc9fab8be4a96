-- State of the vector index (as sqlite/0004). The vector table itself (pgvector) is created at
-- run time, once the dimension of the active embedding source is known.
CREATE TABLE memory_vec_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    active_dim INTEGER,
    embedding_signature TEXT,
    last_reset_at TEXT,
    vec_loaded INTEGER NOT NULL DEFAULT 0
);

INSERT INTO memory_vec_meta (id) VALUES (1);

-- pgvector where the server offers it and this role may create it; without it vector search
-- falls back to keyword search, with the reason reported (the Qdrant tier can hold vectors).
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
        CREATE EXTENSION IF NOT EXISTS vector;
    END IF;
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'pgvector not created: %', SQLERRM;
END
$$;
