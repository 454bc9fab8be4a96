"""pgvector: every tenant gets its own exact top k, however small beside however large; every
vector write is logged for the RAM copies; pgvector's HNSW index is gone (it slowed writes
18 times and starved a tenant beside a larger one: its walk filters after the fact).
"""

import zlib

import numpy as np
import pytest
from sqlalchemy import text

from omniroute.core.db import Database, migrate
from omniroute.memory.search.pgvector import PgVectorIndex
from omniroute.memory.store import MemoryStore
from tests import stores
from tests.test_migrations import copy_migrations

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


def test_a_minority_tenant_gets_its_exact_top_k_beside_a_majority(pg):
    index = PgVectorIndex()
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
    fill(pg, index, "many", np.eye(DIM)[0], 3000)
    few = fill(pg, index, "few", np.eye(DIM)[1], 60)
    query = np.eye(DIM)[0]  # in the middle of the majority
    with pg.read() as conn:
        hits = index.search(conn, "few", query, 20)
    assert [seq for seq, _ in hits] == exact_top(few, query, 20)
    assert all(-1.0 <= similarity <= 1.0 for _, similarity in hits)


def test_every_vector_write_and_delete_is_logged_by_the_trigger(pg, clock):
    index = PgVectorIndex()
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
        start = index.changes.position(conn)
    seqs = list(fill(pg, index, "alice", np.eye(DIM)[0], 3))
    with pg.write() as conn:
        index.upsert(conn, [(seqs[0], "alice", np.ones(DIM))])  # an update
        index.delete(conn, [seqs[1]])
        conn.execute(text("DELETE FROM memories WHERE seq = :seq"), {"seq": seqs[2]})  # cascades
    with pg.read() as conn:
        changed, _ = index.changes.since(conn, start)
        written = conn.execute(text("SELECT count(*) FROM vector_changes")).scalar_one()
    assert sorted(changed) == sorted(seqs)
    assert written == 3 + 1 + 1 + 1, "three inserted, one updated, two deleted"


def test_the_migration_drops_the_old_hnsw_index_and_watches_the_table(pgvector_server, tmp_path):
    database = stores.TestDatabase(pgvector_server)
    db = Database(database.url)
    try:
        migrate.upgrade(db, copy_migrations(tmp_path, 17))
        with db.write() as conn:  # memory_vectors as the index made it before 0018
            conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
            conn.execute(text(
                "CREATE TABLE memory_vectors (seq BIGINT PRIMARY KEY REFERENCES memories (seq)"
                " ON DELETE CASCADE, owner TEXT NOT NULL, embedding vector(8) NOT NULL)"
            ))  # fmt: skip
            conn.execute(text("CREATE INDEX memory_vectors_ann ON memory_vectors"
                              " USING hnsw (embedding vector_cosine_ops)"))  # fmt: skip
        migrate.upgrade(db)
        with db.read() as conn:
            indexes = conn.execute(
                text("SELECT indexname FROM pg_indexes WHERE tablename = 'memory_vectors'")
            ).scalars()
            triggers = conn.execute(
                text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'memory_vectors'::regclass"
                     " AND NOT tgisinternal")
            ).scalars()  # fmt: skip
            assert "memory_vectors_ann" not in set(indexes)
            assert set(triggers) == {
                "vector_changes_inserted", "vector_changes_updated", "vector_changes_deleted"
            }  # fmt: skip
    finally:
        db.dispose()
        database.drop()


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


def test_a_batch_that_names_a_seq_twice_keeps_its_last_vector(pg):
    index = PgVectorIndex()
    with pg.write() as conn:
        index.prepare(conn, "test:model:8", DIM)
    (seq,) = fill(pg, index, "alice", np.eye(DIM)[0], 1)
    with pg.write() as conn:
        index.upsert(conn, [(seq, "alice", np.eye(DIM)[1]), (seq, "alice", np.eye(DIM)[2])])
    with pg.read() as conn:
        assert np.allclose(index.stored(conn, [seq])[seq], np.eye(DIM)[2])
