-- Why a memory was deleted (expired, retention, decay, summarized, cleared; NULL for a
-- plain delete), and the periodic jobs' record: one row per job id, shared by every process
-- and scheduler. A run claims its row (`lease_until`) before it starts, so two schedulers
-- never run one job at once, and a run that started within the interval makes the next
-- trigger a skip.
ALTER TABLE memory_history ADD COLUMN reason TEXT;
CREATE TABLE periodic_runs (
    job_id TEXT PRIMARY KEY,
    lease_until TEXT,
    runner TEXT,
    started_at TEXT,
    finished_at TEXT,
    status TEXT,
    result TEXT,
    error TEXT,
    duration_ms INTEGER,
    runs INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0
);
