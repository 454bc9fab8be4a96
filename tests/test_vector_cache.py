"""Large keys' vectors in RAM, as an exact matrix or an HNSW graph, on both stores: the same
neighbours as sqlite-vec's or pgvector's exact search, caught up from every writer's changes
(another process's too), rebuilt when it cannot catch up, reshaped when a key crosses the
graph's size, loaded from disk after a restart, and never for small keys."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sqlalchemy import delete, insert
from threadpoolctl import threadpool_info

from omniroute.core.db.tables import memories
from omniroute.memory.search import change_log, vectors
from omniroute.memory.search.graph import TenantGraph
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.search.vector_cache import TenantMatrix, VectorCache
from omniroute.memory.search.vectors import SqliteVecIndex

pytestmark = pytest.mark.both_stores

DIM = 8
SHAPES = {"matrix": TenantMatrix, "graph": TenantGraph}


def index_of(database, cache=None):
    """The store's vector index, searching through `cache` (None: the store's own search)."""
    if database.dialect == "postgresql":
        return PgVectorIndex(cache=cache)
    return SqliteVecIndex(cache=cache)


@pytest.fixture(params=["matrix", "graph"])
def shape(request):
    return request.param


@pytest.fixture
def cache(database, shape, tmp_path):
    made = open_cache(database, shape, tmp_path / "graphs")
    yield made
    made.close()


def open_cache(database, shape, folder, graph_min_vectors=5, max_bytes=2**26) -> VectorCache:
    """A process's cache: every large key a graph, or none."""
    graph = graph_min_vectors if shape == "graph" else None
    return VectorCache(
        database.read,
        min_vectors=5,
        max_bytes=max_bytes,
        graph_min_vectors=graph,
        folder=folder,
    )


def vector(n: int) -> np.ndarray:
    return np.random.default_rng(n).normal(size=DIM).astype(np.float32)


def write(database, index, rows, signature="sig") -> None:
    """Vectors of these (seq, owner), with a memory row each (a key's size is its memories')."""
    seqs = [seq for seq, _ in rows]
    with database.write() as conn:
        conn.execute(delete(memories).where(memories.c.seq.in_(seqs)))
        conn.execute(
            insert(memories),
            [
                {"seq": seq, "id": f"m{seq}", "api_key_id": owner, "type": "factual",
                 "key": f"k{seq}", "content": "x", "created_at": "", "updated_at": ""}
                for seq, owner in rows
            ],
        )  # fmt: skip
        index.prepare(conn, signature, DIM)
        index.upsert(conn, [(seq, owner, vector(seq)) for seq, owner in rows])


def nearest(database, index, owner, query=99, k=3):
    with database.read() as conn:
        return index.search(conn, owner, vector(query), k)


def same(held, exact) -> None:
    """The same neighbours in the same order; a graph's float16 scores differ a little."""
    assert [seq for seq, _ in held] == [seq for seq, _ in exact]
    assert [s for _, s in held] == pytest.approx([s for _, s in exact], abs=2e-3)


def held(cache, owner):
    return cache._held.get(owner)


@pytest.fixture
def indexes(database, cache):
    """The cached index of a searching process, a plain one of another writer, and a key
    of 20 vectors beside a key of 3."""
    cached, writer = index_of(database, cache), index_of(database)
    write(database, writer, [(seq, "big") for seq in range(1, 21)] + [(21, "s"), (22, "s")])
    return cached, writer


def test_a_large_key_is_answered_from_ram_as_the_store_would(database, cache, indexes, shape):
    cached, writer = indexes
    first = nearest(database, cached, "big")
    cache.wait()
    assert isinstance(held(cache, "big"), SHAPES[shape]), "built after the first search"
    same(nearest(database, cached, "big"), first)
    same(nearest(database, cached, "big", query=7, k=25), nearest(database, writer, "big", 7, 25))


def test_a_process_with_a_cache_multiplies_on_one_blas_thread(cache):
    """A second BLAS thread ran against hybrid's keyword search on two cores (bench)."""
    blas = [info for info in threadpool_info() if info["user_api"] == "blas"]
    assert blas and all(info["num_threads"] == 1 for info in blas)


def test_a_small_key_stays_with_the_store(database, cache, indexes):
    cached, writer = indexes
    same(nearest(database, cached, "s"), nearest(database, writer, "s"))
    cache.wait()
    assert "s" not in cache._held


def test_another_writers_changes_are_caught_up_before_each_search(database, cache, indexes):
    cached, writer = indexes
    nearest(database, cached, "big")
    cache.wait()
    write(database, writer, [(99, "big"), (5, "s")])  # a new neighbour; 5 moves to "s"
    with database.write() as conn:
        writer.delete(conn, [6])
    found = nearest(database, cached, "big", k=30)
    assert found[0][0] == 99 and found[0][1] == pytest.approx(1.0, abs=2e-3)
    assert {5, 6}.isdisjoint(seq for seq, _ in found)
    same(found, nearest(database, writer, "big", k=30))


def test_a_copy_the_log_no_longer_reaches_is_read_again(database, cache, indexes, monkeypatch):
    cached, writer = indexes
    nearest(database, cached, "big")
    cache.wait()
    if database.dialect == "sqlite":
        monkeypatch.setattr(vectors, "KEPT_CHANGES", 1)  # the log keeps one change
    else:
        monkeypatch.setattr(change_log, "TRUSTED_SECONDS", -1)  # as if it had slept a day
    write(database, writer, [(99, "big"), (98, "big")])
    before = held(cache, "big")
    assert nearest(database, cached, "big") == nearest(database, writer, "big")
    monkeypatch.undo()
    cache.wait()
    assert held(cache, "big") is not before
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


def test_past_the_ram_limit_a_key_stays_with_the_store(database, indexes, shape, tmp_path):
    small = open_cache(database, shape, tmp_path / "graphs", max_bytes=100)
    try:
        cached = index_of(database, small)
        nearest(database, cached, "big")
        small.wait()
        assert small._held == {}
    finally:
        small.close()


def built(database, cache, index, owner="big"):
    """What the cache holds for the key once the search that starts its build is done."""
    nearest(database, index, owner)
    cache.wait()
    return held(cache, owner)


def test_a_restarted_process_loads_its_graph_and_catches_up(database, indexes, tmp_path):
    cached, writer = indexes
    folder = tmp_path / "restart"
    first = open_cache(database, "graph", folder)
    saved = built(database, first, index_of(database, first))
    first.close()  # saves the graph with the log position it holds
    write(database, writer, [(99, "big")])
    again = open_cache(database, "graph", folder)
    try:
        loaded = built(database, again, index_of(database, again))
        assert loaded.saved_head == saved.head != loaded.head, "loaded, then caught up"
        same(nearest(database, index_of(database, again), "big", k=30),
             nearest(database, writer, "big", k=30))  # fmt: skip
    finally:
        again.close()


def test_a_restart_on_an_empty_disk_answers_from_the_store_while_it_builds(
    database, indexes, tmp_path
):
    cached, writer = indexes
    fresh = open_cache(database, "graph", tmp_path / "empty")
    try:
        index = index_of(database, fresh)
        assert nearest(database, index, "big", k=30) == nearest(database, writer, "big", k=30)
        fresh.wait()
        rebuilt = held(fresh, "big")
        assert isinstance(rebuilt, TenantGraph) and rebuilt.saved_head == rebuilt.head
        assert list((tmp_path / "empty").glob("*.usearch")), "saved for the next restart"
    finally:
        fresh.close()


def test_a_key_crossing_the_graphs_size_is_reshaped_both_ways(database, indexes, tmp_path):
    cached, writer = indexes
    cache = open_cache(database, "graph", tmp_path / "graphs", graph_min_vectors=30)
    index = index_of(database, cache)
    try:
        assert isinstance(built(database, cache, index), TenantMatrix)  # 20 vectors
        write(database, writer, [(seq, "big") for seq in range(60, 75)])  # 35
        assert isinstance(built(database, cache, index), TenantGraph)
        same(nearest(database, index, "big", k=40), nearest(database, writer, "big", k=40))
        with database.write() as conn:
            writer.delete(conn, list(range(60, 70)))  # 25: a graph still (kept down to 24)
        assert isinstance(built(database, cache, index), TenantGraph)
        with database.write() as conn:
            writer.delete(conn, list(range(70, 75)))  # 20
        assert isinstance(built(database, cache, index), TenantMatrix)
        same(nearest(database, index, "big", k=40), nearest(database, writer, "big", k=40))
    finally:
        cache.close()


WRITER = """
import sys
import numpy as np
from omniroute.core.db import Database
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.search.vectors import SqliteVecIndex

database = Database(sys.argv[1])
index = PgVectorIndex() if database.dialect == "postgresql" else SqliteVecIndex()
with database.write() as conn:
    index.upsert(conn, [(7, "big", np.ones(8, dtype=np.float32))])
    index.delete(conn, [8])
database.dispose()
"""


def test_another_process_writes_are_caught_up(database, cache, indexes):
    cached, writer = indexes
    built(database, cache, cached)
    url = database.url  # no password on the test servers
    subprocess.run([sys.executable, "-c", WRITER, url], check=True, timeout=120)
    found = nearest(database, cached, "big", query=7, k=30)
    assert 8 not in {seq for seq, _ in found}
    same(found, nearest(database, writer, "big", query=7, k=30))
    with database.read() as conn:
        assert cached.search(conn, "big", np.ones(DIM, dtype=np.float32), 1)[0][0] == 7
