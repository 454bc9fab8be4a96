"""Large keys' vectors in RAM: the same neighbours as sqlite-vec, caught up from every
writer's changes, rebuilt when it cannot catch up, and never for small keys."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_info

from omniroute.core.db import Database, migrate
from omniroute.memory.search import vector_cache
from omniroute.memory.search.vector_cache import VectorCache
from omniroute.memory.search.vectors import SqliteVecIndex

DIM = 8


@pytest.fixture
def database(tmp_path):
    db = Database(f"sqlite:///{tmp_path / 'vectors.db'}")
    migrate.upgrade(db)
    yield db
    db.dispose()


@pytest.fixture
def cache(database):
    made = VectorCache(database.read, min_vectors=5, max_bytes=2**20)
    yield made
    made.close()


def vector(n: int) -> np.ndarray:
    return np.random.default_rng(n).normal(size=DIM).astype(np.float32)


def write(database, index, rows, signature="sig") -> None:
    """Vectors of these (seq, owner), with a memory row each (a key's size is its memories')."""
    with database.write() as conn:
        conn.exec_driver_sql(
            "INSERT OR REPLACE INTO memories (seq, id, api_key_id, type, key, content,"
            " created_at, updated_at) VALUES (?, ?, ?, 'factual', ?, 'x', '', '')",
            [(seq, f"m{seq}", owner, f"k{seq}") for seq, owner in rows],
        )
        index.prepare(conn, signature, DIM)
        index.upsert(conn, [(seq, owner, vector(seq)) for seq, owner in rows])


def nearest(database, index, owner, query=99, k=3):
    with database.read() as conn:
        return index.search(conn, owner, vector(query), k)


def same(held, exact) -> None:
    assert [seq for seq, _ in held] == [seq for seq, _ in exact]
    assert [s for _, s in held] == pytest.approx([s for _, s in exact], abs=1e-5)


@pytest.fixture
def indexes(database, cache):
    """The cached index of a searching process, a plain one of another writer, and a key
    of 20 vectors beside a key of 3."""
    cached, writer = SqliteVecIndex(cache=cache), SqliteVecIndex()
    write(database, writer, [(seq, "big") for seq in range(1, 21)] + [(21, "s"), (22, "s")])
    return cached, writer


def test_a_large_key_is_answered_from_ram_as_sqlite_vec_would(database, cache, indexes):
    cached, writer = indexes
    first = nearest(database, cached, "big")
    cache.wait()
    assert "big" in cache._matrices, "built in the background after the first search"
    same(nearest(database, cached, "big"), first)
    same(nearest(database, cached, "big", query=7, k=25), nearest(database, writer, "big", 7, 25))


def test_a_process_with_a_cache_multiplies_on_one_blas_thread(cache):
    """A second BLAS thread ran against hybrid's keyword search on two cores (bench)."""
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(info["num_threads"] == 1 for info in blas)


def test_a_small_key_stays_with_sqlite_vec(database, cache, indexes):
    cached, writer = indexes
    same(nearest(database, cached, "s"), nearest(database, writer, "s"))
    cache.wait()
    assert "s" not in cache._matrices


def test_another_writers_changes_are_caught_up_before_each_search(database, cache, indexes):
    cached, writer = indexes
    nearest(database, cached, "big")
    cache.wait()
    write(database, writer, [(99, "big"), (5, "s")])  # a new neighbour; 5 moves to "s"
    with database.write() as conn:
        writer.delete(conn, [6])
    held = nearest(database, cached, "big", k=30)
    assert held[0][0] == 99 and held[0][1] == pytest.approx(1.0)
    assert {5, 6}.isdisjoint(seq for seq, _ in held)
    same(held, nearest(database, writer, "big", k=30))


def test_a_matrix_behind_the_pruned_log_is_read_again(database, cache, indexes, monkeypatch):
    cached, writer = indexes
    nearest(database, cached, "big")
    cache.wait()
    monkeypatch.setattr(vector_cache, "KEPT_CHANGES", 1)
    write(database, writer, [(99, "big"), (98, "big")])
    assert nearest(database, cached, "big") == nearest(database, writer, "big")
    cache.wait()
    same(nearest(database, cached, "big", k=30), nearest(database, writer, "big", k=30))
    assert 99 in {seq for seq, _ in nearest(database, cached, "big", k=30)}


def test_a_new_model_is_not_answered_from_the_old_matrix(database, cache, indexes):
    cached, writer = indexes
    nearest(database, cached, "big")
    cache.wait()
    write(database, writer, [(seq, "big") for seq in range(40, 50)], signature="other")
    assert [seq for seq, _ in nearest(database, cached, "big", k=30)] == [
        seq for seq, _ in nearest(database, writer, "big", k=30)
    ]
    assert all(seq >= 40 for seq, _ in nearest(database, cached, "big", k=30))


def test_past_the_ram_limit_a_key_stays_with_sqlite_vec(database, indexes):
    small = VectorCache(database.read, min_vectors=5, max_bytes=100)
    try:
        cached = SqliteVecIndex(cache=small)
        nearest(database, cached, "big")
        small.wait()
        assert small._matrices == {}
    finally:
        small.close()
