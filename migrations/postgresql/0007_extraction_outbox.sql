-- Texts of a chat waiting for fact extraction (as sqlite/0007).
CREATE TABLE extraction_outbox (
    id TEXT PRIMARY KEY,
    api_key_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    text TEXT NOT NULL,
    created_at TEXT NOT NULL,
    requeued INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX extraction_outbox_age ON extraction_outbox (created_at);
