"""Memory vectors in PostgreSQL's pgvector: one table, exact search inside a tenant, and the
RAM copies of large keys (vector_cache.py) for everything past a few thousand vectors.

A search is an exact scan of the tenant's rows through its owner index: every tenant gets
its own top k, however small beside however large. A process with a cache answers a large
key's searches from its matrix or HNSW graph once built (the scan answers meanwhile); a
statement trigger logs every vector write in `vector_changes` for it (migrations/postgresql/
0018). pgvector's own HNSW index is not made: it made writes 18 times slower (20k vectors in
84 s against 4.5 s) and pgserver's pgvector 0.6.2 filters its walk after the fact (no
iterative scans before 0.8), so a tenant beside a larger one got fewer than k
(docs/benchmarks.md, "Vectors on PostgreSQL").
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, text

from omniroute.memory.search.change_log import PostgresChangeLog
from omniroute.memory.search.vector_cache import VectorCache
from omniroute.memory.search.vectors import VectorIndex

TABLE = "memory_vectors"


def _literal(vector: np.ndarray) -> str:
    """pgvector's text form, "[0.1,0.2,...]"."""
    return "[" + ",".join(f"{value:.8g}" for value in np.asarray(vector, dtype="<f4")) + "]"


class PgVectorIndex(VectorIndex):
    """float32 vectors: MEMORY_VEC_QUANTIZATION's int8 is sqlite-vec's alone."""

    changes = PostgresChangeLog("vector_changes")

    def __init__(self, cache: VectorCache | None = None) -> None:
        """`cache` holds large keys' vectors in RAM for their searches."""
        self.cache = cache

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
        conn.execute(text("SELECT vector_changes_watch()"))
        self.record_reset(conn, signature, dim)
        return True

    def upsert(self, conn: Connection, items: list[tuple[int, str, np.ndarray]]) -> None:
        """One statement for the batch, its rows as arrays: the change log's trigger runs once
        a statement, and a statement is a round trip (a row each took a 1M import's vectors
        to 1,600 a second)."""
        if not items:
            return
        latest = {seq: (owner, vector) for seq, owner, vector in items}  # one row a seq
        conn.execute(
            text(
                f"INSERT INTO {TABLE} (seq, owner, embedding)"
                " SELECT seq, owner, CAST(embedding AS vector) FROM unnest("
                " CAST(:seqs AS bigint[]), CAST(:owners AS text[]), CAST(:embeddings AS text[]))"
                " AS batch (seq, owner, embedding)"
                " ON CONFLICT (seq) DO UPDATE"
                " SET owner = excluded.owner, embedding = excluded.embedding"
            ),
            {
                "seqs": list(latest),
                "owners": [owner for owner, _ in latest.values()],
                "embeddings": [_literal(vector) for _, vector in latest.values()],
            },
        )

    def delete(self, conn: Connection, seqs: list[int]) -> None:
        if seqs and self.exists(conn):
            conn.execute(text(f"DELETE FROM {TABLE} WHERE seq = ANY(:seqs)"), {"seqs": seqs})

    def search(
        self,
        conn: Connection,
        owner: str,
        vector: np.ndarray,
        k: int,
        signature: str | None = None,
    ) -> list[tuple[int, float]]:
        if signature is None and not self.exists(conn):
            return []
        if self.cache is not None:
            held = self.cache.search(self, conn, owner, vector, k, signature)
            if held is not None:
                return held
        rows = conn.execute(
            text(
                f"SELECT seq, embedding <=> CAST(:query AS vector) AS distance FROM {TABLE}"
                " WHERE owner = :owner ORDER BY distance LIMIT :k"
            ),
            {"owner": owner, "query": _literal(vector), "k": k},
        ).all()
        return [(seq, 1.0 - distance) for seq, distance in rows]

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
