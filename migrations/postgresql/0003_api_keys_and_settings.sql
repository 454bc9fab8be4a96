-- Gateway API keys (only a SHA-256 hash of the secret) and runtime settings (as sqlite/0003).
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    prefix TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL,
    last_used_at TEXT,
    revoked_at TEXT
);

CREATE TABLE settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL CHECK (value::jsonb IS NOT NULL),
    updated_at TEXT NOT NULL
);
