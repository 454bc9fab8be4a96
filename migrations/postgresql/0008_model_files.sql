-- Model files every process must read, as zip archives by name (as sqlite/0008).
CREATE TABLE model_files (
    name TEXT PRIMARY KEY,
    archive BYTEA NOT NULL,
    created_at TEXT NOT NULL
);
