"""Both stores for the benchmarks, so that each figure can be read for SQLite and PostgreSQL.

PostgreSQL is a database made for the run on BENCH_POSTGRES_URL when that is set (a server of
your own, with pgvector), else on a pgserver PostgreSQL 16 with pgvector started in the
run's temp folder; the database is dropped at the end.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from omniroute.core.config import SETTINGS_BY_NAME
from omniroute.core.db import Database
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.search.vector_cache import VectorCache
from omniroute.memory.search.vectors import SqliteVecIndex, VectorIndex
from tests.stores import TestDatabase, start_pgvector_server

STORES = ("sqlite", "postgresql")


@contextmanager
def database_url(store: str, folder: str) -> Iterator[str]:
    """The URL of an empty database of the given store, for the length of the block."""
    if store == "sqlite":
        yield f"sqlite:///{folder}/bench.db"
        return
    server, base = None, os.environ.get("BENCH_POSTGRES_URL")
    if not base:
        server = start_pgvector_server(Path(folder) / "pgdata")
        base = server.get_uri()
    database = TestDatabase(base)
    try:
        yield database.url
    finally:
        database.drop()
        if server is not None:
            server.cleanup()


def vector_index(database: Database) -> VectorIndex:
    """The vector index the service would build for this database (on SQLite with its RAM
    cache of large keys, at the default settings)."""
    if database.dialect == "postgresql":
        return PgVectorIndex()
    cache = VectorCache(
        database.read,
        min_vectors=SETTINGS_BY_NAME["MEMORY_VEC_CACHE_MIN_VECTORS"].default,
        max_bytes=SETTINGS_BY_NAME["MEMORY_VEC_CACHE_MB"].default * 2**20,
    )
    return SqliteVecIndex(cache=cache)
