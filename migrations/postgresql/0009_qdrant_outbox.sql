-- Memories whose Qdrant point has yet to be written (upsert) or removed (delete). A row is
-- written in the transaction that changes the memory and deleted by the sync job once Qdrant
-- has the change; `version` grows with each new change, so a job deletes only the row it
-- served. A row the job failed on stays (attempts, last_error): the next run repairs it.
CREATE TABLE qdrant_outbox (
    memory_id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    action TEXT NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,
    queued_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT
);
CREATE INDEX qdrant_outbox_age ON qdrant_outbox (queued_at);
