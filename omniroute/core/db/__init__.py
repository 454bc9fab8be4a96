"""The database: one engine for SQLite (embedded) or PostgreSQL (shared), and transactions.

`DATABASE_URL` picks the dialect: `sqlite:///path` for one machine (db_sqlite.py), or
`postgresql://` / `postgres://` for processes on machines that share no disk
(db_postgres.py). Everything above this module speaks portable SQLAlchemy Core; the few
dialect-only statements sit behind small named functions, chosen by `Database.dialect`.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Connection, Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from omniroute.core.db.postgres_engine import detect_pgvector, is_postgres, postgres_engine
from omniroute.core.db.sqlite_engine import BEGIN_OPTION, probe_file, sqlite_engine
from omniroute.core.db.vector_support import VectorSupport

log = logging.getLogger(__name__)

# A write that finds the database locked tries again after a jittered pause until its bound
# (write_wait_seconds) is spent. SQLite's busy handler polls on a fixed schedule, so under many
# writers one can starve; a fresh attempt after a random pause spreads the waiting writers out.
BACKOFF_SECONDS = (0.02, 0.2)
DEFAULT_WRITE_WAIT_SECONDS = 10.0
DEFAULT_POOL_SIZE = 5
# PostgreSQL's codes for "another transaction holds what this one needs": lock timeout,
# deadlock, serialization failure. Each means "try again soon", as SQLite's busy does.
_PG_BUSY_CODES = {"55P03", "40P01", "40001"}


class DatabaseBusy(RuntimeError):
    """Other writers held the database for longer than a write may wait: try again soon."""


def _sqlstate(error: BaseException) -> str | None:
    return getattr(getattr(error, "orig", error), "sqlstate", None)


def is_busy(error: BaseException) -> bool:
    """Whether a driver error means that another connection holds what this one needs."""
    if _sqlstate(error) in _PG_BUSY_CODES:
        return True
    text = str(getattr(error, "orig", error)).lower()
    return "database is locked" in text or "database is busy" in text


# SQLite's words for a database file that cannot be reached at all (a missing or unreadable
# volume); its other OperationalErrors (syntax, a missing table) are bugs, not outages.
_SQLITE_UNAVAILABLE = ("unable to open database file", "disk i/o error")


def is_unavailable(error: BaseException) -> bool:
    """Whether a driver error means that the database cannot be reached now (down, restarting,
    out of connections, a pool whose every connection is taken): try again soon."""
    if isinstance(error, PoolTimeout):
        return True
    if not isinstance(error, OperationalError):
        return False
    if isinstance(error.orig, psycopg.OperationalError):
        return True
    return any(words in str(error.orig).lower() for words in _SQLITE_UNAVAILABLE)


def redacted(url: str) -> str:
    """The URL with any password hidden, fit for logs and the CLI."""
    return make_url(url).render_as_string(hide_password=True)


def _dispose_in_child(engine_ref: weakref.ref[Engine]) -> None:
    engine = engine_ref()
    if engine is not None:
        engine.dispose(close=False)


AFTER_COMMIT = "omniroute_after_commit"
DISABLED = "disabled by VECTOR_STORE_DISABLE_VEC"


class Database:
    def __init__(
        self,
        url: str,
        write_wait_seconds: float = DEFAULT_WRITE_WAIT_SECONDS,
        pool_size: int = DEFAULT_POOL_SIZE,
        vectors_disabled: bool = False,
    ) -> None:
        """`vectors_disabled` (VECTOR_STORE_DISABLE_VEC) keeps vector search off whatever
        the database could do: retrieval is then by keyword alone."""
        parsed = make_url(url)
        self.write_wait_seconds = write_wait_seconds
        self._vector_lock = threading.Lock()
        self._vectors_disabled = vectors_disabled
        if is_postgres(parsed):
            self.dialect = "postgresql"
            self.engine: Engine = postgres_engine(parsed, write_wait_seconds, pool_size)
            self.vectors = VectorSupport("pgvector", error="not checked yet")
        elif parsed.get_backend_name() == "sqlite" and parsed.database:
            self.dialect = "sqlite"
            self.vectors = VectorSupport("sqlite-vec", error="no connection yet")
            self.engine = sqlite_engine(parsed, write_wait_seconds, self._report_vectors)
        else:
            raise ValueError(
                f"unsupported DATABASE_URL {redacted(url)!r}: use sqlite:///path/to/file.db "
                "or postgresql://user:password@host/database"
            )
        if vectors_disabled:
            self.vectors = VectorSupport(self.vectors.backend, error=DISABLED)
        # A forked child (RQ's work horse) must not reuse the parent's pooled connections.
        engine_ref = weakref.ref(self.engine)
        os.register_at_fork(after_in_child=lambda: _dispose_in_child(engine_ref))

    @property
    def path(self) -> str:
        """The SQLite file, or "" for PostgreSQL (whose data lives on its server)."""
        return (self.engine.url.database or "") if self.dialect == "sqlite" else ""

    @property
    def url(self) -> str:
        """The database's URL without its password."""
        return self.engine.url.render_as_string(hide_password=True)

    def _report_vectors(self, support: VectorSupport) -> None:
        """Each new SQLite connection tells whether sqlite-vec loaded into it."""
        if self._vectors_disabled:
            return
        with self._vector_lock:
            if not support.available and self.vectors.error != support.error:
                log.warning("sqlite-vec unavailable, vector search disabled: %s", support.error)
            self.vectors = support

    def check_vectors(self) -> VectorSupport:
        """Look again whether the database can hold vectors (after a migration, say)."""
        if self._vectors_disabled:
            return self.vectors
        if self.dialect == "postgresql":
            self.vectors = detect_pgvector(self.engine)
        else:
            with self.engine.connect():  # a new connection reports what it loaded
                pass
        return self.vectors

    def insert(self, table: Table) -> Any:
        """An INSERT of this dialect, so that `.on_conflict_do_update()` (an upsert) works."""
        return (postgresql if self.dialect == "postgresql" else sqlite).insert(table)

    def take_turns(self, connection: Connection, *name: str) -> None:
        """Writers of the same named thing take turns until this transaction ends.

        SQLite's write lock already lets one writer in at a time. PostgreSQL's writers run
        side by side, so a read-then-write (an upsert on a memory's key) takes a
        transaction-level advisory lock on the name first.
        """
        if self.dialect == "postgresql":
            connection.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))"),
                {"name": "\x1f".join(name)},
            )

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in a transaction, rolled back at the end."""
        with self.engine.connect() as connection, connection.begin():
            yield connection

    @contextmanager
    def write(self, wait_seconds: float | None = None) -> Iterator[Connection]:
        """A connection in a write transaction: committed on success, else rolled back.

        On SQLite the transaction is IMMEDIATE: it waits its turn behind other writers (this
        process's or another's) for at most write_wait_seconds, then raises DatabaseBusy.
        On PostgreSQL writers run side by side; one that waits for another's row locks longer
        than that gets a lock timeout, which the error handler reads as busy too.
        """
        wait = self.write_wait_seconds if wait_seconds is None else wait_seconds
        deadline = time.monotonic() + wait
        while True:
            connection = self.engine.connect()
            try:
                connection.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
                transaction = connection.begin()
                break
            except OperationalError as exc:
                connection.invalidate()  # its BEGIN failed half-way: start the next clean
                connection.close()
                if not is_busy(exc):
                    raise
                if time.monotonic() >= deadline:
                    raise DatabaseBusy(
                        f"the database stayed locked by other writers for {wait:g} s"
                    ) from exc
                time.sleep(random.uniform(*BACKOFF_SECONDS))
        committed: list[Callable[[], None]] = []
        with connection:
            connection.info[AFTER_COMMIT] = committed
            try:
                with transaction:
                    yield connection
            finally:
                connection.info.pop(AFTER_COMMIT, None)
        for callback in committed:
            callback()

    @staticmethod
    def after_commit(connection: Connection, callback: Callable[[], None]) -> None:
        """Run `callback` once `connection`'s write transaction has committed (at once when
        the connection is not one of `write()`'s): what others may read only then."""
        pending = connection.info.get(AFTER_COMMIT)
        if pending is None:
            callback()
        else:
            pending.append(callback)

    @contextmanager
    def scratch(self) -> Iterator[Connection]:
        """A write transaction that is always rolled back: writes that leave no trace."""
        with self.engine.connect() as connection:
            connection.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
            transaction = connection.begin()
            try:
                yield connection
            finally:
                transaction.rollback()

    def scrub(self, *, full: bool = False) -> bool:
        """After deleting text that must leave no trace (an erase, a clear): whether the
        database files no longer hold it.

        SQLite zeroes deleted rows in place (secure_delete, FTS5's secure-delete), but the
        write-ahead log keeps copies of the pages until a checkpoint that truncates it; this
        runs that checkpoint (False when a reader kept it from finishing; the next one will).
        `full` also runs VACUUM, which rewrites the whole file (an exclusive lock).
        PostgreSQL: VACUUM frees the dead rows' space in the tables, their TOAST and
        indexes for reuse, but does not overwrite it (True only with `full`); `full` runs
        VACUUM FULL, which writes the tables anew (an exclusive lock for its run) so the old
        bytes leave the data files; WAL segments hold them until the server recycles them.
        """
        tables = "memories, memory_history, extraction_outbox"
        raw = self.engine.raw_connection()  # outside any transaction: VACUUM needs that
        try:
            if self.dialect == "postgresql":
                raw.driver_connection.autocommit = True
                try:
                    with raw.cursor() as cursor:
                        cursor.execute(f"VACUUM {'FULL ' if full else ''}{tables}")
                finally:
                    raw.driver_connection.autocommit = False
                return full
            if full:
                raw.execute("VACUUM")
            busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            raw.close()
        if busy:
            log.warning("the write-ahead log was not truncated (a reader held it); it will be")
        return not busy

    def ping(self) -> None:
        """Raise unless the database answers a query. On SQLite, on a connection of its own
        that reads the file's schema: a pooled one keeps answering from its cache after the
        file has become garbage, and a missing file is not created."""
        if self.dialect == "sqlite":
            probe_file(self.path)
            return
        with self.read() as connection:
            connection.exec_driver_sql("SELECT 1").scalar_one()

    def dispose(self) -> None:
        self.engine.dispose()
