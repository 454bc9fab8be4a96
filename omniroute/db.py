"""The database: engine over SQLite (pysqlite3), sqlite-vec, pragmas and transactions.

The system `sqlite3` module of this Python cannot load extensions, so the engine uses
`pysqlite3` as its DBAPI module. Every new connection loads sqlite-vec, switches extension
loading off again and sets its pragmas. Transactions are begun by us, not by the driver:
`read()` begins a deferred transaction, `write()` an IMMEDIATE one, so that two writers never
both read and then fail to upgrade their lock (SQLITE_BUSY without waiting).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pysqlite3.dbapi2 as sqlite3
import sqlite_vec
from sqlalchemy import Connection, create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError

log = logging.getLogger(__name__)

# SQLite's own wait for a lock, per attempt; `write()` tries again, with jittered backoff,
# until its bound (write_wait_seconds) is spent. SQLite's busy handler polls on a fixed
# schedule, so under many writers one can starve; a fresh attempt after a random pause
# spreads the waiting writers out.
BUSY_TIMEOUT_MS = 2000
BACKOFF_SECONDS = (0.02, 0.2)
DEFAULT_WRITE_WAIT_SECONDS = 10.0
_BEGIN_OPTION = "omniroute_begin"


class DatabaseBusy(RuntimeError):
    """Other writers held the database for longer than a write may wait: try again soon."""


def is_busy(error: BaseException) -> bool:
    """Whether a driver error means that another connection holds the lock."""
    text = str(getattr(error, "orig", error)).lower()
    return "database is locked" in text or "database is busy" in text


@dataclass
class VectorSupport:
    """Whether sqlite-vec loaded into this process's connections, and why not."""

    available: bool = False
    version: str | None = None
    error: str | None = None


def casefold(value: object) -> str | None:
    """SQL function `omr_casefold`: Unicode case folding (SQLite's LOWER folds only ASCII)."""
    return value.casefold() if isinstance(value, str) else None


def _keep_private(path: str) -> None:
    """Create the database file 0600 (its WAL and SHM files take the same mode from it), and
    make an older one 0600 too: it holds memories, hashed keys and sealed provider keys."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(descriptor)
    for candidate in (path, f"{path}-wal", f"{path}-shm"):
        try:
            if os.stat(candidate).st_mode & 0o077:
                os.chmod(candidate, 0o600)
        except FileNotFoundError:
            continue


def _dispose_in_child(engine_ref: weakref.ref[Engine]) -> None:
    engine = engine_ref()
    if engine is not None:
        engine.dispose(close=False)


class Database:
    def __init__(self, url: str, write_wait_seconds: float = DEFAULT_WRITE_WAIT_SECONDS) -> None:
        parsed = make_url(url)
        if parsed.get_backend_name() != "sqlite" or not parsed.database:
            raise ValueError(f"unsupported DATABASE_URL {url!r}: use sqlite:///path/to/file.db")
        if parsed.database != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(parsed.database)), exist_ok=True)
            _keep_private(parsed.database)
        self.vectors = VectorSupport()
        self.write_wait_seconds = write_wait_seconds
        self._busy_timeout_ms = max(1, min(BUSY_TIMEOUT_MS, int(write_wait_seconds * 1000)))
        self._vector_lock = threading.Lock()
        self.engine: Engine = create_engine(
            parsed.set(drivername="sqlite+pysqlite"),
            module=sqlite3,
            connect_args={"check_same_thread": False},
        )
        event.listen(self.engine, "connect", self._on_connect)
        event.listen(self.engine, "begin", self._on_begin)
        # A forked child (RQ's work horse) must not reuse the parent's pooled connections.
        engine_ref = weakref.ref(self.engine)
        os.register_at_fork(after_in_child=lambda: _dispose_in_child(engine_ref))

    @property
    def path(self) -> str:
        return self.engine.url.database or ""

    def _on_connect(self, dbapi_connection: sqlite3.Connection, _record: object) -> None:
        # We issue BEGIN ourselves (see _on_begin); the driver must not.
        dbapi_connection.isolation_level = None
        self._load_sqlite_vec(dbapi_connection)
        dbapi_connection.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        dbapi_connection.execute("PRAGMA journal_mode = WAL")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")
        dbapi_connection.execute("PRAGMA foreign_keys = ON")
        dbapi_connection.create_function("omr_casefold", 1, casefold, deterministic=True)

    def _load_sqlite_vec(self, dbapi_connection: sqlite3.Connection) -> None:
        try:
            dbapi_connection.enable_load_extension(True)
            try:
                sqlite_vec.load(dbapi_connection)
            finally:
                dbapi_connection.enable_load_extension(False)
            version = dbapi_connection.execute("SELECT vec_version()").fetchone()[0]
        except Exception as exc:  # any failure leaves keyword search working
            with self._vector_lock:
                if self.vectors.error is None:
                    log.warning("sqlite-vec unavailable, vector search disabled: %s", exc)
                self.vectors = VectorSupport(available=False, error=str(exc))
            return
        with self._vector_lock:
            self.vectors = VectorSupport(available=True, version=version)

    @staticmethod
    def _on_begin(connection: Connection) -> None:
        mode = connection.get_execution_options().get(_BEGIN_OPTION, "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a deferred transaction, rolled back at the end."""
        with self.engine.connect() as connection, connection.begin():
            yield connection

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in an IMMEDIATE transaction: committed on success, else rolled back.

        Waits its turn behind other writers (this process's or another's) for at most
        write_wait_seconds, then raises DatabaseBusy.
        """
        deadline = time.monotonic() + self.write_wait_seconds
        while True:
            connection = self.engine.connect()
            try:
                connection.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
                transaction = connection.begin()
                break
            except OperationalError as exc:
                connection.invalidate()  # its BEGIN failed half-way: start the next clean
                connection.close()
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(
                        f"the database stayed locked by other writers for "
                        f"{self.write_wait_seconds:g} s"
                    ) from exc
                time.sleep(random.uniform(*BACKOFF_SECONDS))
        with connection, transaction:
            yield connection

    @contextmanager
    def scratch(self) -> Iterator[Connection]:
        """An IMMEDIATE transaction that is always rolled back: writes that leave no trace."""
        with self.engine.connect() as connection:
            connection.execution_options(**{_BEGIN_OPTION: "IMMEDIATE"})
            transaction = connection.begin()
            try:
                yield connection
            finally:
                transaction.rollback()

    def ping(self) -> None:
        """Raise unless the database answers a query."""
        with self.read() as connection:
            connection.exec_driver_sql("SELECT 1").scalar_one()

    def dispose(self) -> None:
        self.engine.dispose()
