-- State of the local vector index: which embedding signature ("{source}:{model}:{dim}[:int8]")
-- the vectors were made with. The vec0 table itself is created at run time, once the
-- dimension of the active embedding source is known.
CREATE TABLE memory_vec_meta (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    active_dim INTEGER,
    embedding_signature TEXT,
    last_reset_at TEXT,
    vec_loaded INTEGER NOT NULL DEFAULT 0
);

INSERT INTO memory_vec_meta (id) VALUES (1);
