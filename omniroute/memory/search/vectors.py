"""Memory vectors: the index's shared record, and sqlite-vec's vec0 table partitioned by owner.

Every index keys its rows by memories.seq and searches inside one tenant (the reference
took a global top-k and filtered afterwards, starving every tenant but the largest).
memory_vec_meta records the embedding signature the vectors were made with; a new signature
rebuilds the index and marks every memory for re-embedding. On SQLite the owner is the vec0
partition key; PostgreSQL's pgvector index is in pgvector.py. On both, a large key's
searches can be served from RAM (vector_cache.py), for which every vector write is logged in
`vector_changes` (here by the index, on PostgreSQL by a trigger).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
from sqlalchemy import Connection, select, update

from omniroute.core.clock import now_iso
from omniroute.core.db.tables import memories, memory_vec_meta
from omniroute.memory.search.change_log import ChangeLog, SqliteChangeLog
from omniroute.memory.search.vector_cache import VectorCache

QUANTIZATIONS = ("none", "int8")
TABLE = "vec_memories"
# Vectors per vec0 chunk. Every partition (an owner: a key, or one end user of a key) gets
# chunks of its own, allocated whole: sqlite-vec's default of 1,024 made each end user with
# a single memory cost 1 MB (10 GB for 10,000 users); 16 keeps a user's few memories in one
# chunk (benchmarks.md, "Vector chunks"). The chunks' partition column is indexed: vec0
# finds a partition's chunks by scanning them all otherwise (1.5 ms at 30,000 partitions).
CHUNK_SIZE = 16
CHUNK_INDEX = f"{TABLE}_chunks_owner"
CHANGES = "vector_changes"
KEPT_CHANGES = 100_000  # SQLite's log keeps this many of the newest changes
PART = 500  # seqs bound in one statement


@dataclass(frozen=True)
class VectorMeta:
    active_dim: int | None
    signature: str | None
    last_reset_at: str | None


def _blob(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def record_changes(conn: Connection, seqs: list[int]) -> None:
    """Log that these memories' vectors changed (written or deleted), and prune the log."""
    if not seqs:
        return
    conn.exec_driver_sql(f"INSERT INTO {CHANGES} (memory_seq) VALUES (?)", [(seq,) for seq in seqs])
    conn.exec_driver_sql(
        f"DELETE FROM {CHANGES} WHERE id <= (SELECT max(id) FROM {CHANGES}) - {KEPT_CHANGES}"
    )


class VectorIndex(ABC):
    """What every vector index does; the record of its signature is shared."""

    quantization = "none"
    cache: VectorCache | None = None  # large keys' vectors in RAM (float32 indexes only)
    changes: ChangeLog  # where every vector write is logged, for the cache

    def meta(self, conn: Connection) -> VectorMeta:
        row = conn.execute(select(memory_vec_meta)).mappings().one()
        return VectorMeta(row["active_dim"], row["embedding_signature"], row["last_reset_at"])

    def record_reset(self, conn: Connection, signature: str, dim: int) -> None:
        """Every memory needs a vector of the new signature: record it, mark them all."""
        conn.execute(update(memories).values(needs_reindex=1))
        conn.execute(
            update(memory_vec_meta).values(
                active_dim=dim, embedding_signature=signature, last_reset_at=now_iso()
            )
        )

    @abstractmethod
    def exists(self, conn: Connection) -> bool: ...

    @abstractmethod
    def prepare(self, conn: Connection, signature: str, dim: int) -> bool:
        """Make the index hold vectors of this signature; True when it had to be rebuilt."""
        ...

    @abstractmethod
    def upsert(self, conn: Connection, items: list[tuple[int, str, np.ndarray]]) -> None:
        """Store (seq, owner, vector) rows, replacing any vector a seq had."""
        ...

    @abstractmethod
    def delete(self, conn: Connection, seqs: list[int]) -> None: ...

    @abstractmethod
    def search(
        self,
        conn: Connection,
        owner: str,
        vector: np.ndarray,
        k: int,
        signature: str | None = None,
    ) -> list[tuple[int, float]]:
        """The owner's k nearest vectors as (seq, cosine similarity), best first.

        `signature` is the index's, as the caller read it (`meta`) in this transaction: the
        index exists then, and neither is asked again (each is a round trip on PostgreSQL).
        """
        ...

    @abstractmethod
    def count(self, conn: Connection) -> int: ...

    def stored(self, conn: Connection, seqs: list[int]) -> dict[int, np.ndarray]:
        """The full-precision vectors held for these seqs (none when quantised)."""
        if not seqs or self.quantization != "none" or not self.exists(conn):
            return {}
        return {seq: np.frombuffer(blob, dtype="<f4") for seq, _, blob in self.rows(conn, seqs)}

    def rows(self, conn: Connection, seqs: list[int]) -> list[tuple[int, str, bytes]]:
        """(seq, owner, little-endian float32 bytes) of the vectors held for these seqs."""
        found = []
        for start in range(0, len(seqs), PART):
            found += self._rows(conn, seqs[start : start + PART])
        return found

    @abstractmethod
    def _rows(self, conn: Connection, seqs: list[int]) -> list[tuple[int, str, bytes]]:
        """`rows` for at most PART seqs."""
        ...

    @abstractmethod
    def owned(self, conn: Connection, owner: str) -> list[int]:
        """The seqs of the owner's vectors."""
        ...


def create_table(conn: Connection, element: str, dim: int) -> None:
    """The vec0 table of `dim`-dimensional `element` (float or int8) vectors, partitioned by
    owner, in chunks of CHUNK_SIZE, with the chunks' partition index."""
    conn.exec_driver_sql(
        f"CREATE VIRTUAL TABLE {TABLE} USING vec0(owner TEXT PARTITION KEY, "
        f"embedding {element}[{dim}] distance_metric=cosine, chunk_size={CHUNK_SIZE})"
    )
    conn.exec_driver_sql(f"CREATE INDEX {CHUNK_INDEX} ON {TABLE}_chunks (partition00)")


def rechunk(conn: Connection) -> int | None:
    """Rebuild a vec0 table made before CHUNK_SIZE (with sqlite-vec's 1,024-vector chunks and
    no partition index) by copying its vectors into a new one: none is embedded again. How
    many were copied; None when there was no such table."""
    found = conn.exec_driver_sql("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,)).first()
    if found is None or "chunk_size" in found[0]:
        return None
    shape = re.search(r"embedding (float|int8)\[(\d+)\]", found[0])
    if shape is None:
        raise ValueError(f"{TABLE} has an unknown shape: {found[0]}")
    element, dim = shape[1], int(shape[2])
    kept = "vec_memories_rechunked"
    conn.exec_driver_sql(
        f"CREATE TEMP TABLE {kept} AS SELECT rowid AS seq, owner, embedding FROM {TABLE}"
    )
    conn.exec_driver_sql(f"DROP TABLE {TABLE}")
    create_table(conn, element, dim)
    value = "vec_int8(embedding)" if element == "int8" else "embedding"
    conn.exec_driver_sql(
        f"INSERT INTO {TABLE} (rowid, owner, embedding) SELECT seq, owner, {value} FROM {kept}"
    )
    copied = conn.exec_driver_sql(f"SELECT count(*) FROM {kept}").scalar_one()
    conn.exec_driver_sql(f"DROP TABLE {kept}")
    return copied


class SqliteVecIndex(VectorIndex):
    """One vec0 table whose partition key is the owner: KNN runs inside one tenant."""

    changes = SqliteChangeLog(CHANGES)

    def __init__(self, quantization: str = "none", cache: VectorCache | None = None) -> None:
        """`cache` holds large keys' vectors in RAM for their searches (float32 only)."""
        if quantization not in QUANTIZATIONS:
            raise ValueError(f"quantization must be one of {QUANTIZATIONS}")
        self.quantization = quantization
        self.cache = cache if quantization == "none" else None
        # int8 vectors are stored quantised; queries are quantised the same way.
        self._value = "vec_quantize_int8(?, 'unit')" if quantization == "int8" else "?"

    def exists(self, conn: Connection) -> bool:
        found = conn.exec_driver_sql(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (TABLE,)
        ).first()
        return found is not None

    def prepare(self, conn: Connection, signature: str, dim: int) -> bool:
        if self.meta(conn).signature == signature and self.exists(conn):
            rechunk(conn)  # one migration 0021 could not reach (sqlite-vec had not loaded)
            return False
        element = "int8" if self.quantization == "int8" else "float"
        conn.exec_driver_sql(f"DROP TABLE IF EXISTS {TABLE}")
        create_table(conn, element, dim)
        self.record_reset(conn, signature, dim)
        return True

    def upsert(self, conn: Connection, items: list[tuple[int, str, np.ndarray]]) -> None:
        self.delete(conn, [seq for seq, _, _ in items])
        conn.exec_driver_sql(
            f"INSERT INTO {TABLE} (rowid, owner, embedding) VALUES (?, ?, {self._value})",
            [(seq, owner, _blob(vector)) for seq, owner, vector in items],
        )
        record_changes(conn, [seq for seq, _, _ in items])

    def delete(self, conn: Connection, seqs: list[int]) -> None:
        if seqs and self.exists(conn):
            conn.exec_driver_sql(f"DELETE FROM {TABLE} WHERE rowid = ?", [(seq,) for seq in seqs])
            record_changes(conn, seqs)

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
        rows = conn.exec_driver_sql(
            f"SELECT rowid, distance FROM {TABLE} "
            f"WHERE embedding MATCH {self._value} AND owner = ? AND k = ? ORDER BY distance",
            (_blob(vector), owner, k),
        ).all()
        return [(seq, 1.0 - distance) for seq, distance in rows]

    def count(self, conn: Connection) -> int:
        if not self.exists(conn):
            return 0
        return conn.exec_driver_sql(f"SELECT count(*) FROM {TABLE}").scalar_one()

    def _rows(self, conn: Connection, seqs: list[int]) -> list[tuple[int, str, bytes]]:
        marks = ", ".join("?" * len(seqs))
        return conn.exec_driver_sql(
            f"SELECT rowid, owner, embedding FROM {TABLE} WHERE rowid IN ({marks})", tuple(seqs)
        ).all()

    def owned(self, conn: Connection, owner: str) -> list[int]:
        return list(
            conn.exec_driver_sql(f"SELECT rowid FROM {TABLE} WHERE owner = ?", (owner,)).scalars()
        )
