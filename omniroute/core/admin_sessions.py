"""Studio logins kept server-side, so that logging out ends every copy of the cookie.

The cookie (signed by Flask) carries a random session id; only its SHA-256 is stored, as for
gateway keys. A session is live until it expires or is revoked (logout).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import delete, insert, select, update

from omniroute.core.clock import to_iso, utc_now
from omniroute.core.db import Database
from omniroute.core.db.tables import admin_sessions


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class AdminSessionStore:
    def __init__(self, database: Database) -> None:
        self.db = database

    def start(self, lifetime: timedelta) -> str:
        """Record a new session; return its id (for the cookie). Expired ones are dropped."""
        session_id = secrets.token_urlsafe(32)
        now = utc_now()
        with self.db.write() as conn:
            conn.execute(delete(admin_sessions).where(admin_sessions.c.expires_at <= to_iso(now)))
            conn.execute(
                insert(admin_sessions).values(
                    id_hash=_hash(session_id),
                    created_at=to_iso(now),
                    expires_at=to_iso(now + lifetime),
                )
            )
        return session_id

    def is_live(self, session_id: str) -> bool:
        with self.db.read() as conn:
            row = conn.execute(
                select(admin_sessions.c.expires_at, admin_sessions.c.revoked_at).where(
                    admin_sessions.c.id_hash == _hash(session_id)
                )
            ).first()
        return row is not None and row.revoked_at is None and row.expires_at > to_iso(utc_now())

    def revoke(self, session_id: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                update(admin_sessions)
                .where(admin_sessions.c.id_hash == _hash(session_id))
                .values(revoked_at=to_iso(utc_now()))
            )
