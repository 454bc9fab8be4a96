"""Large keys' vectors in RAM: an exact cosine search several times faster than sqlite-vec's.

sqlite-vec scans a key's whole partition for every query; numpy multiplies the same vectors,
held in one float32 matrix, several times faster with the same result (docs/benchmarks.md
has the figures). So a process keeps a matrix for each key of at least `min_vectors`
vectors that it searches, up to `max_bytes` in all. The vector table stays the truth: a
matrix is derived from it, built in the background the first time the key is searched
(sqlite-vec answers meanwhile), and caught up before every search from `vector_changes`,
the log every vector write appends to (any process's: the worker's backfill too). A matrix
that has fallen behind the log's pruned head, or whose index was rebuilt for another
model, is built again.

A process with such a cache multiplies on one BLAS thread: on two cores OpenBLAS's second
thread ran against hybrid's keyword search beside it and made hybrid slower.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager

import numpy as np
from sqlalchemy import Connection, func, select
from threadpoolctl import threadpool_limits

from omniroute.core.db.tables import memories, memory_vec_meta

log = logging.getLogger(__name__)

CHANGES = "vector_changes"
KEPT_CHANGES = 100_000  # the log keeps this many of the newest changes
RECHECK_SECONDS = 60  # how long a key found too small is left alone
VECTORS = "vec_memories"


def record_changes(conn: Connection, seqs: list[int]) -> None:
    """Log that these memories' vectors changed (written or deleted), and prune the log."""
    if not seqs:
        return
    conn.exec_driver_sql(f"INSERT INTO {CHANGES} (memory_seq) VALUES (?)", [(seq,) for seq in seqs])
    conn.exec_driver_sql(
        f"DELETE FROM {CHANGES} WHERE id <= (SELECT max(id) FROM {CHANGES}) - {KEPT_CHANGES}"
    )


def _head(conn: Connection) -> int:
    """The id of the newest change ever logged (0 for none)."""
    found = conn.exec_driver_sql(
        "SELECT seq FROM sqlite_sequence WHERE name = ?", (CHANGES,)
    ).scalar()
    return found or 0


def _signature(conn: Connection) -> str | None:
    """The embedding signature the vector table holds now (it is rebuilt on a change)."""
    return conn.execute(select(memory_vec_meta.c.embedding_signature)).scalar()


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class TenantMatrix:
    """One key's vectors: rows of a growing float32 matrix, unit length, by memory seq."""

    def __init__(self, owner: str, signature: str | None, dim: int, head: int) -> None:
        self.owner, self.signature, self.head = owner, signature, head
        self.lock = threading.Lock()
        self._seqs = np.zeros(0, dtype=np.int64)
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._rows: dict[int, int] = {}

    @property
    def nbytes(self) -> int:
        return self._matrix.nbytes

    def __len__(self) -> int:
        return len(self._rows)

    def put(self, seq: int, vector: np.ndarray) -> None:
        row = self._rows.get(seq)
        if row is None:
            row = len(self._rows)
            if row == len(self._seqs):  # full: grow by half
                size = max(16, row + row // 2)
                self._seqs = np.resize(self._seqs, size)
                grown = np.zeros((size, self._matrix.shape[1]), dtype=np.float32)
                grown[:row] = self._matrix[:row]
                self._matrix = grown
            self._rows[seq] = row
            self._seqs[row] = seq
        self._matrix[row] = _unit(vector)

    def drop(self, seq: int) -> None:
        row = self._rows.pop(seq, None)
        if row is None:
            return
        last = len(self._rows)
        if row != last:  # the last row takes the freed place
            moved = int(self._seqs[last])
            self._seqs[row], self._matrix[row] = moved, self._matrix[last]
            self._rows[moved] = row

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        count = len(self._rows)
        if count == 0 or k <= 0:
            return []
        similarity = self._matrix[:count] @ _unit(vector.astype(np.float32))
        k = min(k, count)
        best = np.argpartition(-similarity, k - 1)[:k]
        best = best[np.argsort(-similarity[best], kind="stable")]
        return [(int(self._seqs[row]), float(similarity[row])) for row in best]


class VectorCache:
    """The matrices of one process's large keys, and their upkeep."""

    def __init__(
        self,
        read: Callable[[], AbstractContextManager[Connection]],
        *,
        min_vectors: int,
        max_bytes: int,
    ) -> None:
        """`read` opens a read transaction (Database.read), for building in the background."""
        threadpool_limits(limits=1, user_api="blas")  # for the whole process: see above
        self._read = read
        self.min_vectors = min_vectors
        self.max_bytes = max_bytes
        self._matrices: dict[str, TenantMatrix] = {}
        self._checked: dict[str, float] = {}  # owner -> when it was found too small
        self._building: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="omniroute-vectors")

    def search(
        self, conn: Connection, owner: str, vector: np.ndarray, k: int
    ) -> list[tuple[int, float]] | None:
        """The owner's k nearest as (seq, cosine), or None: not a large key, or not built
        yet (the caller asks sqlite-vec). A small key costs no query here."""
        matrix = self._matrices.get(owner)
        if matrix is None or matrix.signature != _signature(conn):
            self._consider(owner, len(vector))
            return None
        with matrix.lock:
            if not self._catch_up(conn, matrix):
                self._forget(owner)
                self._consider(owner, len(vector))
                return None
            return matrix.nearest(vector, k)

    def _catch_up(self, conn: Connection, matrix: TenantMatrix) -> bool:
        """Apply the changes logged since the matrix was read; False when some are gone."""
        head = _head(conn)
        if head == matrix.head:
            return True
        changes = conn.exec_driver_sql(
            f"SELECT id, memory_seq FROM {CHANGES} WHERE id > ? ORDER BY id", (matrix.head,)
        ).all()
        if not changes or changes[0][0] != matrix.head + 1:
            return False  # pruned past the matrix: read it again
        seqs = list(dict.fromkeys(seq for _, seq in changes))
        found = {}
        for start in range(0, len(seqs), 500):
            part = seqs[start : start + 500]
            marks = ", ".join("?" * len(part))
            found.update(
                (seq, (owner, blob))
                for seq, owner, blob in conn.exec_driver_sql(
                    f"SELECT rowid, owner, embedding FROM {VECTORS} WHERE rowid IN ({marks})",
                    tuple(part),
                ).all()
            )
        for seq in seqs:
            owner, blob = found.get(seq, (None, None))
            if owner == matrix.owner:
                matrix.put(seq, np.frombuffer(blob, dtype="<f4"))
            else:
                matrix.drop(seq)
        matrix.head = changes[-1][0]
        return True

    def _consider(self, owner: str, dim: int) -> None:
        """Build the owner's matrix in the background if the key is large enough."""
        with self._lock:
            if owner in self._building:
                return
            if time.monotonic() - self._checked.get(owner, -RECHECK_SECONDS) < RECHECK_SECONDS:
                return
            self._building.add(owner)
        self._pool.submit(self._build, owner, dim)

    def _build(self, owner: str, dim: int) -> None:
        try:
            with self._read() as conn:
                size = conn.execute(
                    select(func.count()).where(memories.c.api_key_id == owner)
                ).scalar_one()  # the memories' index counts fast; vec0 would scan
                rows = []
                if size >= self.min_vectors and self._fits(size * dim * 4, owner):
                    head, signature = _head(conn), _signature(conn)
                    rows = conn.exec_driver_sql(
                        f"SELECT rowid, embedding FROM {VECTORS} WHERE owner = ?", (owner,)
                    ).all()
            if len(rows) < self.min_vectors:
                with self._lock:
                    self._checked[owner] = time.monotonic()
                return
            matrix = TenantMatrix(owner, signature, dim, head)
            for seq, blob in rows:
                matrix.put(seq, np.frombuffer(blob, dtype="<f4"))
            with self._lock:
                self._matrices[owner] = matrix
            log.info("vectors of a key of %d memories held in RAM (%d MB)", len(rows),
                     matrix.nbytes // 2**20)  # fmt: skip
        except Exception:  # sqlite-vec keeps answering; the next search tries again
            log.exception("the vector matrix of a key was not built")
        finally:
            with self._lock:
                self._building.discard(owner)

    def _fits(self, size: int, owner: str) -> bool:
        with self._lock:
            held = sum(m.nbytes for o, m in self._matrices.items() if o != owner)
        if held + size <= self.max_bytes:
            return True
        log.warning("a large key's vectors stay in sqlite-vec: MEMORY_VEC_CACHE_MB is reached")
        return False

    def _forget(self, owner: str) -> None:
        with self._lock:
            self._matrices.pop(owner, None)

    def wait(self) -> None:
        """Let a build in progress finish (tests, shutdown)."""
        self._pool.submit(lambda: None).result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
