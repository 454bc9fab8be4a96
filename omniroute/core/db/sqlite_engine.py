"""The embedded store's engine: SQLite through pysqlite3, sqlite-vec loaded on every connection.

The system `sqlite3` module of this Python cannot load extensions, so the engine uses
`pysqlite3` as its DBAPI module. Every new connection loads sqlite-vec, switches extension
loading off again and sets its pragmas. Transactions are begun by us, not by the driver:
`read()` begins a deferred transaction, `write()` an IMMEDIATE one, so that two writers never
both read and then fail to upgrade their lock (SQLITE_BUSY without waiting).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3
import sqlite_vec
from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import URL, Engine

from omniroute.core.db.vector_support import VectorSupport

log = logging.getLogger(__name__)

# SQLite's own wait for a lock, per attempt; Database.write tries again until its bound.
BUSY_TIMEOUT_MS = 2000
BEGIN_OPTION = "omniroute_begin"


def casefold(value: object) -> str | None:
    """SQL function `omr_casefold`: Unicode case folding (SQLite's LOWER folds only ASCII)."""
    return value.casefold() if isinstance(value, str) else None


def keep_private(path: str) -> None:
    """Create the database file 0600 (its WAL and SHM files take the same mode from it), and
    make an older one 0600 too: it holds memories, hashed keys and sealed provider keys."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(descriptor)
    for candidate in (path, f"{path}-wal", f"{path}-shm"):
        try:
            if os.stat(candidate).st_mode & 0o077:
                os.chmod(candidate, 0o600)
        except FileNotFoundError:
            continue


def sqlite_engine(
    url: URL, write_wait_seconds: float, report: Callable[[VectorSupport], None]
) -> Engine:
    """An engine whose connections carry sqlite-vec (reported through `report`) and pragmas."""
    if url.database != ":memory:":
        keep_private(url.database)
    busy_timeout_ms = max(1, min(BUSY_TIMEOUT_MS, int(write_wait_seconds * 1000)))
    engine = create_engine(
        url.set(drivername="sqlite+pysqlite"),
        module=sqlite3,
        connect_args={"check_same_thread": False},
    )

    def on_connect(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # We issue BEGIN ourselves (see on_begin); the driver must not.
        dbapi_connection.isolation_level = None
        report(_load_sqlite_vec(dbapi_connection))
        dbapi_connection.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")
        dbapi_connection.execute("PRAGMA foreign_keys = ON")
        # A deleted row's bytes are overwritten with zeros, not left in free space.
        dbapi_connection.execute("PRAGMA secure_delete = ON")
        dbapi_connection.create_function("omr_casefold", 1, casefold, deterministic=True)

    def on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(BEGIN_OPTION, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    return engine


def _load_sqlite_vec(dbapi_connection: sqlite3.Connection) -> VectorSupport:
    try:
        dbapi_connection.enable_load_extension(True)
        try:
            sqlite_vec.load(dbapi_connection)
        finally:
            dbapi_connection.enable_load_extension(False)
        version = dbapi_connection.execute("SELECT vec_version()").fetchone()[0]
    except Exception as exc:  # any failure leaves keyword search working
        return VectorSupport("sqlite-vec", available=False, error=str(exc))
    return VectorSupport("sqlite-vec", available=True, version=version)


def probe_file(path: str) -> None:
    """Read the database file's schema on a fresh connection (never creating the file);
    raise sqlite3.Error when it is missing or not a database."""
    uri = f"{Path(path).absolute().as_uri()}?mode=rw"
    connection = sqlite3.connect(uri, uri=True, timeout=5)
    try:
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    finally:
        connection.close()
