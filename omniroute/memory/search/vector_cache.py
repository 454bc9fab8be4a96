"""Large keys' vectors in RAM: an exact matrix, or an HNSW graph for the largest, on both stores.

sqlite-vec and pgvector scan a key's rows for every exact query; numpy multiplies the same
vectors, held in one float32 matrix, several times faster with the same result, and a graph
(graph.py) answers a million in milliseconds (docs/benchmarks.md has the figures). So a
process keeps a matrix or a graph for each key of at least `min_vectors` vectors that it
searches, up to `max_bytes` in all. The vector table stays the truth: a copy is derived from
it, built in the background the first time the key is searched (the store answers
meanwhile), and caught up before every search from the index's change log (`vector_changes`,
which every vector write of any process appends to: the worker's backfill too). A copy that
has fallen behind the log's pruned head, or whose index was rebuilt for another model, is
built again. The cache reads through the index that asks it (`VectorIndex.owned`,
`VectorIndex.rows`, `VectorIndex.changes`).

A process with such a cache multiplies on one BLAS thread: on two cores OpenBLAS's second
thread ran against hybrid's keyword search beside it and made hybrid slower.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import numpy as np
from sqlalchemy import Connection, func, select
from threadpoolctl import threadpool_limits

from omniroute.core.db.tables import memories, memory_vec_meta
from omniroute.memory.search.change_log import ChangeLog
from omniroute.memory.search.graph import TenantGraph
from omniroute.memory.search.key_copies import KeyCopies

log = logging.getLogger(__name__)


class VectorIndex(Protocol):
    """What the cache reads through: the index that asks it (vectors.py, pgvector.py)."""

    changes: ChangeLog

    def owned(self, conn: Connection, owner: str) -> list[int]: ...

    def rows(self, conn: Connection, seqs: list[int]) -> list[tuple[int, str, bytes]]: ...


READ_PART = 20_000  # vectors read in one transaction while a key is built
GRAPH_KEPT = 0.8  # a graph stays a graph down to this share of MEMORY_VEC_GRAPH_MIN_VECTORS


def _signature(conn: Connection) -> str | None:
    """The embedding signature the vector table holds now (it is rebuilt on a change)."""
    return conn.execute(select(memory_vec_meta.c.embedding_signature)).scalar()


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


class TenantMatrix:
    """One key's vectors: rows of a growing float32 matrix, unit length, by memory seq."""

    def __init__(self, owner: str, signature: str | None, dim: int, head: object) -> None:
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

    def put_many(self, seqs: np.ndarray, vectors: np.ndarray) -> None:
        for seq, vector in zip(seqs.tolist(), vectors, strict=True):
            self.put(seq, vector)

    @staticmethod
    def estimate(count: int, dim: int) -> int:
        """The bytes a matrix of `count` vectors takes."""
        return count * dim * 4

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


Held = TenantMatrix | TenantGraph


class VectorCache(KeyCopies[Held]):
    """The matrices and graphs of one process's large keys, and their upkeep."""

    what = "vectors"

    def __init__(
        self,
        read: Callable[[], AbstractContextManager[Connection]],
        *,
        min_vectors: int,
        max_bytes: int,
        graph_min_vectors: int | None = None,
        folder: Path | None = None,
    ) -> None:
        """`read` opens a read transaction (Database.read), for building in the background.
        A key of `graph_min_vectors` vectors or more (None: never) is held as an HNSW graph,
        saved under `folder` (None: built again after every restart)."""
        super().__init__(max_bytes, "omniroute-vectors")
        threadpool_limits(limits=1, user_api="blas")  # for the whole process: see above
        self._read = read
        self.min_vectors = min_vectors
        self.graph_min_vectors = graph_min_vectors
        self.folder = folder

    def search(
        self,
        index: VectorIndex,
        conn: Connection,
        owner: str,
        vector: np.ndarray,
        k: int,
        signature: str | None = None,
    ) -> list[tuple[int, float]] | None:
        """The owner's k nearest as (seq, cosine), or None: not a large key, or not built
        yet (the index answers itself). A small key costs no query here; `signature` is the
        index's as the caller read it (None: read here)."""
        held = self._held.get(owner)
        if held is None or held.signature != (signature or _signature(conn)):
            self._consider(owner, index, len(vector))
            return None
        with held.lock:
            if not self._catch_up(index, conn, held):
                self._forget(owner)
                self._consider(owner, index, len(vector))
                return None
            if self._wants_graph(len(held), held) != isinstance(held, TenantGraph):
                self._consider(owner, index, len(vector), again=True)  # this one answers meanwhile
            return held.nearest(vector, k)

    def _wants_graph(self, count: int, held: Held | None) -> bool:
        """Whether a key of `count` vectors is to be a graph; one that is stays one down to
        GRAPH_KEPT of the threshold, so a key at the edge is not rebuilt back and forth."""
        if self.graph_min_vectors is None:
            return False
        keep = GRAPH_KEPT if isinstance(held, TenantGraph) else 1
        return count >= self.graph_min_vectors * keep

    def _catch_up(self, index: VectorIndex, conn: Connection, held: Held) -> bool:
        """Apply the changes logged since the structure was read; False when some are gone."""
        changed = index.changes.since(conn, held.head)
        if changed is None:
            return False  # pruned past the structure: read it again
        seqs, head = changed
        found = {seq: (owner, blob) for seq, owner, blob in index.rows(conn, seqs)}
        for seq in seqs:
            owner, blob = found.get(seq, (None, None))
            if owner == held.owner:
                held.put(seq, np.frombuffer(blob, dtype="<f4"))
            else:
                held.drop(seq)
        held.head = head
        return True

    def _read_key(self, owner: str, index: VectorIndex, dim: int) -> Held | None:
        """The key's vectors in the shape its size asks for, caught up; None for a key too
        small or too large for the RAM left. A saved graph is loaded and caught up; a new one
        is saved. Vectors are read in parts, each in a transaction of its own, after the log's
        head: what changes meanwhile is applied again by the catch-up."""
        with self._read() as conn:
            size = conn.execute(
                select(func.count()).where(memories.c.owner == owner)
            ).scalar_one()  # the memories' index counts fast; vec0 would scan
            if size < self.min_vectors:
                return None
            head, signature = index.changes.position(conn), _signature(conn)
            seqs = index.owned(conn, owner)
        if len(seqs) < self.min_vectors:
            return None
        graph = self._wants_graph(len(seqs), self._held.get(owner))
        shape = TenantGraph if graph else TenantMatrix
        if not self._fits(shape.estimate(len(seqs), dim), owner):
            return None
        if graph and self.folder is not None:
            loaded = TenantGraph.load(self.folder, owner, signature)
            if loaded is not None:
                with self._read() as conn, loaded.lock:
                    if self._catch_up(index, conn, loaded):
                        return loaded
        held = shape(owner, signature, dim, head)
        for start in range(0, len(seqs), READ_PART):
            with self._read() as conn:
                rows = index.rows(conn, seqs[start : start + READ_PART])
            part = [(seq, blob) for seq, found_owner, blob in rows if found_owner == owner]
            if part:
                vectors = np.frombuffer(b"".join(blob for _, blob in part), dtype="<f4")
                held.put_many(np.array([seq for seq, _ in part]), vectors.reshape(-1, dim))
        with self._read() as conn, held.lock:
            self._catch_up(index, conn, held)
        if graph and self.folder is not None:
            with held.lock:
                held.save(self.folder)
        return held

    def close(self) -> None:
        """Stop building, and save each graph that moved on since it was saved."""
        self._stop_building()
        if self.folder is None:
            return
        for held in list(self._held.values()):
            if isinstance(held, TenantGraph):
                with held.lock:
                    if held.head != held.saved_head:
                        held.save(self.folder)
