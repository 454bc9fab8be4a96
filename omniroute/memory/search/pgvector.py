"""Memory vectors in PostgreSQL's pgvector: one table, an HNSW index, search inside a tenant.

pgvector filters an HNSW search after the index walk: with `WHERE owner = ...` it returns
those of its ef_search nearest that belong to the owner, which for a small tenant beside a
large one is often none at all. So a tenant's size decides: up to EXACT_LIMIT vectors the
search is an exact scan of that tenant's rows (its owner index, a sort; exact, and a few ms
at this size), and a larger tenant walks the HNSW index with ef_search at least k, falling
back to the exact scan whenever the walk found fewer than k of its own. Every tenant gets
its own top k, whatever its neighbours hold. A process with a RAM cache (vector_cache.py)
answers a large key's searches from it once built; a trigger logs every vector write in
`vector_changes` for it (migrations/postgresql/0018).
"""

from __future__ import annotations

import threading

import numpy as np
from cachetools import TTLCache
from sqlalchemy import Connection, text

from omniroute.memory.search.change_log import PostgresChangeLog
from omniroute.memory.search.vector_cache import VectorCache
from omniroute.memory.search.vectors import VectorIndex

TABLE = "memory_vectors"
EXACT_LIMIT = 20_000
# The HNSW walk's breadth: at least k, and pgvector's own limit at most.
MIN_EF_SEARCH, MAX_EF_SEARCH = 40, 1000
# A tenant's size class is looked up at most this often per process.
SIZE_CACHE_SECONDS = 60.0


def _literal(vector: np.ndarray) -> str:
    """pgvector's text form, "[0.1,0.2,...]"."""
    return "[" + ",".join(f"{value:.8g}" for value in np.asarray(vector, dtype="<f4")) + "]"


class PgVectorIndex(VectorIndex):
    """float32 vectors: MEMORY_VEC_QUANTIZATION's int8 is sqlite-vec's alone."""

    changes = PostgresChangeLog("vector_changes")

    def __init__(self, cache: VectorCache | None = None) -> None:
        """`cache` holds large keys' vectors in RAM for their searches."""
        self.cache = cache
        self._large: TTLCache[str, bool] = TTLCache(10_000, SIZE_CACHE_SECONDS)
        self._lock = threading.Lock()

    def exists(self, conn: Connection) -> bool:
        return conn.execute(text(f"SELECT to_regclass('{TABLE}') IS NOT NULL")).scalar_one()

    def prepare(self, conn: Connection, signature: str, dim: int) -> bool:
        if self.meta(conn).signature == signature and self.exists(conn):
            return False
        conn.execute(text(f"DROP TABLE IF EXISTS {TABLE}"))
        conn.execute(
            text(
                f"CREATE TABLE {TABLE} ("
                " seq BIGINT PRIMARY KEY REFERENCES memories (seq) ON DELETE CASCADE,"
                f" owner TEXT NOT NULL, embedding vector({dim}) NOT NULL)"
            )
        )
        conn.execute(text(f"CREATE INDEX {TABLE}_owner ON {TABLE} (owner)"))
        conn.execute(
            text(f"CREATE INDEX {TABLE}_ann ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
        )
        conn.execute(text("SELECT vector_changes_watch()"))
        self.record_reset(conn, signature, dim)
        with self._lock:
            self._large.clear()
        return True

    def upsert(self, conn: Connection, items: list[tuple[int, str, np.ndarray]]) -> None:
        if not items:
            return
        conn.execute(
            text(
                f"INSERT INTO {TABLE} (seq, owner, embedding)"
                " VALUES (:seq, :owner, CAST(:embedding AS vector))"
                " ON CONFLICT (seq) DO UPDATE"
                " SET owner = excluded.owner, embedding = excluded.embedding"
            ),
            [
                {"seq": seq, "owner": owner, "embedding": _literal(vector)}
                for seq, owner, vector in items
            ],
        )

    def delete(self, conn: Connection, seqs: list[int]) -> None:
        if seqs and self.exists(conn):
            conn.execute(text(f"DELETE FROM {TABLE} WHERE seq = ANY(:seqs)"), {"seqs": seqs})

    def search(
        self, conn: Connection, owner: str, vector: np.ndarray, k: int
    ) -> list[tuple[int, float]]:
        if not self.exists(conn):
            return []
        if self.cache is not None:
            held = self.cache.search(self, conn, owner, vector, k)
            if held is not None:
                return held
        bound = {"owner": owner, "query": _literal(vector), "k": k}
        if self._is_large(conn, owner):
            ef_search = max(MIN_EF_SEARCH, min(MAX_EF_SEARCH, k))
            conn.execute(text(f"SET LOCAL hnsw.ef_search = {ef_search}"))
            rows = conn.execute(
                text(
                    f"SELECT seq, embedding <=> CAST(:query AS vector) AS distance FROM {TABLE}"
                    " WHERE owner = :owner ORDER BY distance LIMIT :k"
                ),
                bound,
            ).all()
            if len(rows) == k:
                return [(seq, 1.0 - distance) for seq, distance in rows]
        # OFFSET 0 keeps the inner query apart, so the planner cannot order it by the index.
        rows = conn.execute(
            text(
                "SELECT seq, distance FROM ("
                f" SELECT seq, embedding <=> CAST(:query AS vector) AS distance FROM {TABLE}"
                " WHERE owner = :owner OFFSET 0) AS tenant ORDER BY distance LIMIT :k"
            ),
            bound,
        ).all()
        return [(seq, 1.0 - distance) for seq, distance in rows]

    def _is_large(self, conn: Connection, owner: str) -> bool:
        with self._lock:
            large = self._large.get(owner)
        if large is None:
            held = conn.execute(
                text(
                    f"SELECT count(*) FROM (SELECT 1 FROM {TABLE} WHERE owner = :owner"
                    " LIMIT :limit) AS held"
                ),
                {"owner": owner, "limit": EXACT_LIMIT + 1},
            ).scalar_one()
            large = held > EXACT_LIMIT
            with self._lock:
                self._large[owner] = large
        return large

    def count(self, conn: Connection) -> int:
        if not self.exists(conn):
            return 0
        return conn.execute(text(f"SELECT count(*) FROM {TABLE}")).scalar_one()

    def _rows(self, conn: Connection, seqs: list[int]) -> list[tuple[int, str, bytes]]:
        # pgvector's binary form is a header (dim, unused: 2 + 2 bytes) and big-endian floats.
        rows = conn.execute(
            text(f"SELECT seq, owner, vector_send(embedding) FROM {TABLE} WHERE seq = ANY(:seqs)"),
            {"seqs": seqs},
        ).all()
        return [
            (seq, owner, np.frombuffer(bytes(raw)[4:], dtype=">f4").astype("<f4").tobytes())
            for seq, owner, raw in rows
        ]

    def owned(self, conn: Connection, owner: str) -> list[int]:
        return list(
            conn.execute(
                text(f"SELECT seq FROM {TABLE} WHERE owner = :owner"), {"owner": owner}
            ).scalars()
        )
