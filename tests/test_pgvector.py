"""pgvector: every tenant gets its own top k, however small beside however large.

pgvector filters an HNSW walk after the walk, so `WHERE owner = ...` alone starves a
minority tenant; PgVectorIndex scans small tenants exactly and falls back to the exact scan
whenever the walk comes back short. The test shows the short walk first, then the answer.
"""

import zlib

import numpy as np
import pytest
from sqlalchemy import text

from omniroute.core.db import Database
from omniroute.memory.search import pgvector
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.store import MemoryStore

DIM = 8


@pytest.fixture
def pg(pg_database, clock):
    pg_database.empty()
    database = Database(pg_database.url)
    yield database
    database.dispose()


INSERT_MEMORIES = text(
    "INSERT INTO memories (id, api_key_id, type, key, content, created_at, updated_at)"
    " SELECT :owner || '-' || n, :owner, 'factual', 'k' || n, 'fact ' || n, :now, :now"
    " FROM generate_series(1, :count) AS n RETURNING seq"
)


def fill(database: Database, index: PgVectorIndex, owner: str, centre: np.ndarray, count: int):
    """`count` memories of `owner` with vectors scattered around `centre`; their seqs."""
    rng = np.random.default_rng(zlib.crc32(owner.encode()))
    vectors = centre + 0.3 * rng.standard_normal((count, DIM))
    now = "2026-01-01T00:00:00.000Z"
    with database.write() as conn:
        found = conn.execute(INSERT_MEMORIES, {"owner": owner, "count": count, "now": now})
        seqs = found.scalars().all()
        index.upsert(conn, [(seq, owner, v) for seq, v in zip(seqs, vectors, strict=True)])
    return dict(zip(seqs, vectors, strict=True))


def exact_top(vectors: dict, query: np.ndarray, k: int) -> list[int]:
    def distance(vector):
        return 1 - vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query))

    return sorted(vectors, key=lambda seq: distance(vectors[seq]))[:k]


@pytest.fixture
def two_tenants(pg, monkeypatch):
    """A minority tenant `few` (60 vectors) beside `many` (3,000) around another centre;
    both count as large, so both walk the HNSW index first."""
    monkeypatch.setattr(pgvector, "EXACT_LIMIT", 50)
    index = PgVectorIndex()
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
    many_centre, few_centre = np.eye(DIM)[0], np.eye(DIM)[1]
    many = fill(pg, index, "many", many_centre, 3000)
    few = fill(pg, index, "few", few_centre, 60)
    return pg, index, many, few, many_centre


def test_a_bare_filtered_hnsw_walk_starves_the_minority_tenant(two_tenants):
    """The problem itself: this is what pgvector answers without the fallback."""
    pg, _, _, _, query = two_tenants
    with pg.scratch() as conn:  # without the owner index, as the planner may well choose
        conn.execute(text("DROP INDEX memory_vectors_owner"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        conn.execute(text("SET LOCAL hnsw.ef_search = 40"))
        rows = conn.execute(
            text(
                "SELECT seq FROM memory_vectors WHERE owner = 'few'"
                " ORDER BY embedding <=> CAST(:q AS vector) LIMIT 20"
            ),
            {"q": pgvector._literal(query)},
        ).all()
    assert len(rows) < 20


def test_the_minority_tenant_still_gets_its_exact_top_k(two_tenants):
    """Under the same planner choices as above: the short walk falls back to the scan."""
    pg, index, _, few, query = two_tenants
    with pg.scratch() as conn:
        conn.execute(text("DROP INDEX memory_vectors_owner"))
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        hits = index.search(conn, "few", query, 20)
    assert [seq for seq, _ in hits] == exact_top(few, query, 20)
    assert all(-1.0 <= similarity <= 1.0 for _, similarity in hits)


def test_the_majority_tenant_is_served_by_the_hnsw_walk_with_high_recall(two_tenants):
    pg, index, many, _, query = two_tenants
    with pg.read() as conn:
        hits = index.search(conn, "many", query, 20)
    assert len(hits) == 20
    assert len({seq for seq, _ in hits} & set(exact_top(many, query, 20))) >= 18


def test_a_small_tenant_is_scanned_exactly_without_the_index(pg):
    index = PgVectorIndex()
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
    small = fill(pg, index, "small", np.eye(DIM)[2], 30)
    fill(pg, index, "big", np.eye(DIM)[3], 500)
    query = np.eye(DIM)[3]  # near the other tenant: the small one's nearest are far
    with pg.read() as conn:
        assert [seq for seq, _ in index.search(conn, "small", query, 10)] == exact_top(
            small, query, 10
        )
        assert index.search(conn, "nobody", query, 10) == []


def test_deleting_a_memory_deletes_its_vector(pg, clock):
    index = PgVectorIndex()
    store = MemoryStore(pg, clock=clock, vectors=index)
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
    memory, _ = store.create(api_key_id="alice", key="k", content="to be deleted")
    with pg.write() as conn:
        seq = conn.execute(text("SELECT seq FROM memories")).scalar_one()
        index.upsert(conn, [(seq, "alice", np.ones(DIM))])
    with pg.read() as conn:
        assert index.count(conn) == 1
    store.delete(memory.id)
    with pg.read() as conn:
        assert index.count(conn) == 0


def test_a_new_signature_rebuilds_the_index_at_its_dimension(pg):
    index = PgVectorIndex()
    with pg.write() as conn:
        assert index.prepare(conn, "a:model:8", DIM) is True
        assert index.prepare(conn, "a:model:8", DIM) is False
    fill(pg, index, "alice", np.eye(DIM)[0], 3)
    with pg.write() as conn:
        assert index.prepare(conn, "b:model:4", 4) is True
        assert index.count(conn) == 0
        assert index.meta(conn).active_dim == 4
        pending = conn.execute(text("SELECT count(*) FROM memories WHERE needs_reindex = 1"))
        assert pending.scalar_one() == 3
