"""The shared store's engine: PostgreSQL through psycopg 3, a pool sized for dynos.

Web, worker and release processes on machines that share no disk all use one PostgreSQL
(`DATABASE_URL`, as a platform's add-on sets it: `postgres://` is read as `postgresql://`).
Vectors live in pgvector when the database has the extension; without it, vector search
falls back to keyword search with the reason reported, as it does when sqlite-vec is missing.
"""

from __future__ import annotations

import time

from sqlalchemy import create_engine, event, exc, text
from sqlalchemy.engine import URL, Engine

from omniroute.core.db.vector_support import VectorSupport

DRIVER = "postgresql+psycopg"
# A pooled connection the server closed (a restart, an idle timeout) is replaced before use:
# one idle this long is pinged first, one older is made anew. A ping is a round trip (0.4 ms
# here, bench/retrieval_latency.py): before every checkout it cost a retrieval, which opens
# two or three transactions, about a millisecond.
PING_IDLE_SECONDS = 2.0
POOL_RECYCLE_SECONDS = 300


def is_postgres(url: URL) -> bool:
    return url.get_backend_name() in {"postgres", "postgresql"}


def postgres_engine(url: URL, write_wait_seconds: float, pool_size: int) -> Engine:
    """An engine for `url`; a write waits for another's row locks at most write_wait_seconds."""
    engine = create_engine(
        url.set(drivername=DRIVER),
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_recycle=POOL_RECYCLE_SECONDS,
        connect_args={"application_name": "omniroute"},
    )
    lock_timeout_ms = max(1, int(write_wait_seconds * 1000))

    def on_connect(dbapi_connection, _record: object) -> None:
        # SET, not a startup option: connection poolers (PgBouncer) refuse startup options.
        with dbapi_connection.cursor() as cursor:
            cursor.execute(f"SET lock_timeout = {lock_timeout_ms}")
        dbapi_connection.commit()

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "checkin", _note_idle)
    event.listen(engine, "checkout", _ping_if_idle)
    return engine


def _note_idle(_dbapi_connection, record) -> None:
    record.info["idle_since"] = time.monotonic()


def _ping_if_idle(dbapi_connection, record, _proxy) -> None:
    """Ping a connection that sat idle PING_IDLE_SECONDS; a dead one is replaced (the pool
    retries the checkout with a new connection on DisconnectionError)."""
    idle_since = record.info.get("idle_since")
    if idle_since is None or time.monotonic() - idle_since < PING_IDLE_SECONDS:
        return
    try:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        dbapi_connection.rollback()
    except Exception as error:  # any failure: the server or the socket is gone
        raise exc.DisconnectionError(str(error)) from error


def detect_pgvector(engine: Engine) -> VectorSupport:
    """Whether this database has pgvector, and if not, whether the server could have it."""
    with engine.connect() as conn:
        version = conn.execute(
            text("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        ).scalar()
        if version is not None:
            return VectorSupport("pgvector", available=True, version=version)
        offered = conn.execute(
            text("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        ).first()
    if offered:
        error = "the server offers pgvector but this database has not created it"
    else:
        error = "this PostgreSQL server has no pgvector extension"
    return VectorSupport("pgvector", available=False, error=error)
