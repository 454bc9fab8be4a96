"""Gateway API keys: `sk-omr-` secrets shown once, stored only as SHA-256 hashes.

The secrets are 256 random bits, so a fast hash is enough (no password-style stretching);
lookups go by hash, and the final comparison is constant-time. The key a secret found is kept
for a few seconds (read_cache.py): a revoke or scope change applies at once in the process
that made it, and within that TTL in the others.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, fields

from sqlalchemy import insert, select, update

from omniroute.core.clock import now_iso
from omniroute.core.db import Database
from omniroute.core.db.read_cache import ReadCache
from omniroute.core.db.tables import api_keys

KEY_PREFIX = "sk-omr-"
# What a key may do with its memories through MCP (reference section 14): `read:memory` for
# search and get, `write:memory` for add, update, delete and clear. Chat is never limited.
READ_MEMORY = "read:memory"
WRITE_MEMORY = "write:memory"
SCOPES = (READ_MEMORY, WRITE_MEMORY)
_DISPLAY_CHARS = len(KEY_PREFIX) + 4
# last_used_at is written at most this often per key, so that a busy key does not turn
# every proxied request into a database write.
_LAST_USED_INTERVAL_SECONDS = 60.0


@dataclass(frozen=True)
class ApiKey:
    id: str
    name: str
    prefix: str
    created_at: str
    last_used_at: str | None = None
    revoked_at: str | None = None
    scopes: tuple[str, ...] = SCOPES


class UnknownScope(ValueError):
    pass


def checked_scopes(scopes) -> tuple[str, ...]:
    """The scopes in their canonical order; an unknown one is refused (UnknownScope)."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown:
        raise UnknownScope(f"unknown scope {unknown[0]!r}: the scopes are {', '.join(SCOPES)}")
    return tuple(scope for scope in SCOPES if scope in scopes)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class ApiKeyStore:
    def __init__(self, database: Database) -> None:
        self.db = database
        self._last_touched: dict[str, float] = {}
        self._touch_lock = threading.Lock()
        self._by_digest: ReadCache[ApiKey] = ReadCache(1024)

    def create(self, name: str, scopes=SCOPES) -> tuple[ApiKey, str]:
        """Make a key; return it with its secret, which is never available again."""
        secret = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(
            id=str(uuid.uuid4()),
            name=name,
            prefix=secret[:_DISPLAY_CHARS],
            created_at=now_iso(),
            scopes=checked_scopes(scopes),
        )
        with self.db.write() as conn:
            conn.execute(
                insert(api_keys).values(
                    id=key.id,
                    name=key.name,
                    prefix=key.prefix,
                    secret_hash=hash_secret(secret),
                    created_at=key.created_at,
                    scopes=" ".join(key.scopes),
                )
            )
        return key, secret

    def list_keys(self, *, include_revoked: bool = False) -> list[ApiKey]:
        query = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.id)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        with self.db.read() as conn:
            return [_from_row(row) for row in conn.execute(query).mappings()]

    def get(self, key_id: str, *, include_revoked: bool = False) -> ApiKey | None:
        """Return a key by id: an active one, or a revoked one too when asked."""
        query = select(api_keys).where(api_keys.c.id == key_id)
        if not include_revoked:
            query = query.where(api_keys.c.revoked_at.is_(None))
        with self.db.read() as conn:
            row = conn.execute(query).mappings().first()
        return _from_row(row) if row is not None else None

    def set_scopes(self, key_id: str, scopes) -> ApiKey | None:
        """Give an active key these scopes; None when there is no such active key."""
        chosen = checked_scopes(scopes)
        with self.db.write() as conn:
            result = conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(scopes=" ".join(chosen))
            )
        self._by_digest.clear()
        return self.get(key_id) if result.rowcount == 1 else None

    def revoke(self, key_id: str) -> bool:
        """Revoke an active key; False when there is no such active key."""
        with self.db.write() as conn:
            result = conn.execute(
                update(api_keys)
                .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now_iso())
            )
        self._by_digest.clear()
        return result.rowcount == 1

    def authenticate(self, secret: str) -> ApiKey | None:
        """Return the active key whose secret this is, or None."""
        if not secret.startswith(KEY_PREFIX):
            return None
        digest = hash_secret(secret)
        key = self._by_digest.get(digest, lambda: self._active(digest))
        if key is not None:
            self._touch(key.id)
        return key

    def _active(self, digest: str) -> ApiKey | None:
        with self.db.read() as conn:
            row = (
                conn.execute(select(api_keys).where(api_keys.c.secret_hash == digest))
                .mappings()
                .first()
            )
        if row is None or row["revoked_at"] is not None:
            return None
        if not hmac.compare_digest(row["secret_hash"], digest):
            return None
        return _from_row(row)

    def _touch(self, key_id: str) -> None:
        now = time.monotonic()
        with self._touch_lock:
            if now - self._last_touched.get(key_id, -_LAST_USED_INTERVAL_SECONDS) < (
                _LAST_USED_INTERVAL_SECONDS
            ):
                return
            self._last_touched[key_id] = now
        with self.db.write() as conn:
            conn.execute(
                update(api_keys).where(api_keys.c.id == key_id).values(last_used_at=now_iso())
            )


def _from_row(row) -> ApiKey:
    values = {field.name: row[field.name] for field in fields(ApiKey)}
    return ApiKey(**values | {"scopes": tuple(row["scopes"].split())})
