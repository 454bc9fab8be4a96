-- One audit row for every create, update and delete of a memory. Rows outlive the memory
-- they describe, so that "who changed this fact, and from what" can still be answered.
CREATE TABLE memory_history (
    seq INTEGER PRIMARY KEY,
    memory_id TEXT NOT NULL,
    api_key_id TEXT NOT NULL,
    action TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    old_type TEXT,
    new_type TEXT,
    old_key TEXT,
    new_key TEXT,
    old_content TEXT,
    new_content TEXT,
    created_at TEXT NOT NULL
);

CREATE INDEX memory_history_memory ON memory_history (memory_id, seq);
CREATE INDEX memory_history_owner ON memory_history (api_key_id, created_at);
