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
from omniroute.memory.search.change_log import change_log
from omniroute.memory.search.keyword_cache import KeywordCache
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


def default(name: str):
    return SETTINGS_BY_NAME[name].default


def vector_index(database: Database, folder: Path | None = None) -> VectorIndex:
    """The vector index the service would build for this database, with its RAM cache of
    large keys (matrices and graphs) at the default settings; graphs saved under `folder`."""
    cache = VectorCache(
        database.read,
        min_vectors=default("MEMORY_VEC_CACHE_MIN_VECTORS"),
        max_bytes=default("MEMORY_VEC_CACHE_MB") * 2**20,
        graph_min_vectors=default("MEMORY_VEC_GRAPH_MIN_VECTORS"),
        folder=folder,
    )
    if database.dialect == "postgresql":
        return PgVectorIndex(cache=cache)
    return SqliteVecIndex(cache=cache)


def keyword_cache(database: Database) -> KeywordCache:
    """The keyword indexes of large keys the service would keep, at the default settings."""
    changes = change_log(database.dialect, "memory_changes")
    return KeywordCache(
        database.read,
        changes,
        min_memories=default("MEMORY_KEYWORD_INDEX_MIN_MEMORIES"),
        max_bytes=default("MEMORY_KEYWORD_INDEX_MB") * 2**20,
    )
