"""Both stores for the tests: SQLite (a file per test) and PostgreSQL (one database per run).

Loaded as a pytest plugin (tests/conftest.py). A module marked `both_stores` runs each of its
tests twice, as `test[sqlite]` and `test[postgresql]`; a test marked `sqlite_only` stays on
SQLite (it reads the file, its pragmas or FTS5). PostgreSQL is `pgserver`'s (16, with
pgvector), started once a run in a temp dir; each test gets the database emptied and the
vector table dropped. `system_postgres` is the machine's PostgreSQL 15, which has no pgvector.
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from omniroute.core.db import Database, migrate
from omniroute.core.db.tables import metadata
from omniroute.memory.search import change_log

STORES = ("sqlite", "postgresql")
# The machine's own server (trust auth); it has no pgvector.
SYSTEM_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def pytest_configure(config):
    config.addinivalue_line("markers", "both_stores: run on SQLite and on PostgreSQL")
    config.addinivalue_line("markers", "sqlite_only: in a both_stores module, SQLite alone")


def pytest_generate_tests(metafunc):
    if "store_kind" not in metafunc.fixturenames:
        return
    both = metafunc.definition.get_closest_marker("both_stores")
    only = metafunc.definition.get_closest_marker("sqlite_only")
    kinds = STORES if both and not only else ("sqlite",)
    metafunc.parametrize("store_kind", kinds, indirect=True, ids=list(kinds))


@pytest.fixture
def store_kind(request) -> str:
    return request.param


class TestDatabase:
    """A database created for this run on a server, dropped at the end."""

    def __init__(self, server_url: str) -> None:
        server = make_url(server_url).set(drivername="postgresql+psycopg")
        self.name = f"omniroute_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
        self._admin = create_engine(server, isolation_level="AUTOCOMMIT")
        with self._admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{self.name}"'))
        self.url = server.set(database=self.name).render_as_string(hide_password=False)
        self.url = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        self._engine: Engine | None = None

    def migrate(self) -> None:
        database = Database(self.url)
        migrate.upgrade(database)
        database.dispose()

    def empty(self) -> None:
        """Every table emptied and the runtime vector table gone, as a fresh database."""
        if self._engine is None:
            self._engine = create_engine(self.url.replace("://", "+psycopg://", 1))
        names = ", ".join(
            [table.name for table in metadata.sorted_tables if table.name != "memory_vec_meta"]
            + list(change_log.LOGS)  # raw SQL tables (triggers write them)
        )
        with self._engine.begin() as conn:
            conn.execute(text("SET LOCAL lock_timeout = '20s'"))
            conn.execute(text("DROP TABLE IF EXISTS memory_vectors"))
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
            conn.execute(
                text(
                    "UPDATE memory_vec_meta SET active_dim = NULL, embedding_signature = NULL,"
                    " last_reset_at = NULL"
                )
            )

    def drop(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        with self._admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)'))
        self._admin.dispose()


def start_pgvector_server(folder: Path):
    """pgserver's PostgreSQL 16 with pgvector, on a Unix socket in `folder` (about 1 s);
    `.get_uri()` is its URL, `.cleanup()` stops it."""
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set", harmless
        warnings.simplefilter("ignore")
        import pgserver

    return pgserver.get_server(folder, cleanup_mode="stop")


# A test server's data is thrown away at the end: it need not survive a crash, so commits
# do not wait for the disk (the tests' PostgreSQL half runs several times faster).
THROWAWAY = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


@pytest.fixture(scope="session")
def pgvector_server(tmp_path_factory) -> Iterator[str]:
    server = start_pgvector_server(tmp_path_factory.mktemp("pgdata"))
    admin = create_engine(
        make_url(server.get_uri()).set(drivername="postgresql+psycopg"),
        isolation_level="AUTOCOMMIT",
    )
    with admin.connect() as conn:
        for name, value in THROWAWAY.items():
            conn.execute(text(f"ALTER SYSTEM SET {name} = '{value}'"))
        conn.execute(text("SELECT pg_reload_conf()"))
    admin.dispose()
    yield server.get_uri()
    server.cleanup()


@pytest.fixture(scope="session")
def pg_database(pgvector_server) -> Iterator[TestDatabase]:
    database = TestDatabase(pgvector_server)
    database.migrate()
    yield database
    database.drop()


@pytest.fixture
def database_url(store_kind, request, tmp_path) -> str | None:
    """The test's database URL: None for SQLite in DATA_DIR, or the emptied PostgreSQL."""
    if store_kind == "sqlite":
        return None
    database: TestDatabase = request.getfixturevalue("pg_database")
    database.empty()
    return database.url


@pytest.fixture
def system_postgres() -> Iterator[TestDatabase]:
    """A fresh database on the machine's PostgreSQL 15 (no pgvector), dropped after."""
    database = TestDatabase(SYSTEM_POSTGRES)
    yield database
    database.drop()
