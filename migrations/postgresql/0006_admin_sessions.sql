-- Studio logins, revocable in every process at once (as sqlite/0006).
CREATE TABLE admin_sessions (
    id_hash TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);
