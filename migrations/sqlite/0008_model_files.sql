-- Model files every process must read (the distilled static embedding model), kept in the
-- database as a zip archive by name, so a model built by one process (a worker on its own
-- disk) reaches all of them.
CREATE TABLE model_files (
    name TEXT PRIMARY KEY,
    archive BLOB NOT NULL,
    created_at TEXT NOT NULL
);
