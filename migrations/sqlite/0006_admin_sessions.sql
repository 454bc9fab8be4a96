-- Studio logins. The signed cookie carries a session's id; a session is live while it is
-- here, not revoked and not past its expiry, so logging out ends it for every copy of the
-- cookie, in every process.
CREATE TABLE admin_sessions (
    id_hash TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT
);
CREATE INDEX admin_sessions_expiry ON admin_sessions (expires_at);
