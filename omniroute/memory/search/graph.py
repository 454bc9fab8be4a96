"""The largest keys' vectors as an HNSW graph (usearch, float16): approximate nearest
neighbours in a few milliseconds where the exact matrix multiplies a million rows.

usearch was chosen over hnswlib on bench/ann_candidates.py's figures (docs/benchmarks.md):
at 1M vectors both reach recall@10 0.97 against the exact scan with M 32 and ef 512, hnswlib
in half the time (p95 1.6 against 3.3 ms) but with float32 vectors in 1.33 GB against
usearch's 0.85 GB in float16, and a process serving a 1M key is to stay under 1.5 GB. int8
stopped at recall 0.90.

A graph is one more shape of the cache's per-key structure (vector_cache.py): it is caught up
from the same change log, and saved under the process's own data folder with the log position
it holds, so a restart loads it and catches up instead of building it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

import numpy as np

from omniroute.memory.search import change_log

CONNECTIVITY = 32  # M: links per node
EXPANSION_ADD = 256  # ef while building
EXPANSION_SEARCH = 512  # ef while searching: recall@10 0.974 at 1M (bench/ann_candidates.py)
BUILD_THREADS = 2


def _index_class():
    """usearch's Index, imported when a first graph is made (its import takes 0.1 s)."""
    from usearch.index import Index

    return Index


def _stem(folder: Path, owner: str) -> Path:
    return folder / hashlib.sha256(owner.encode()).hexdigest()[:32]


class TenantGraph:
    """One key's vectors in an HNSW graph keyed by memory seq (cosine, float16)."""

    def __init__(self, owner: str, signature: str | None, dim: int, head: object) -> None:
        self.owner, self.signature, self.head = owner, signature, head
        self.saved_head: object = None  # the log position of the copy on disk
        self.lock = threading.Lock()
        self._index = _index_class()(
            ndim=dim,
            metric="cos",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )

    @property
    def nbytes(self) -> int:
        return int(self._index.memory_usage)

    def __len__(self) -> int:
        return len(self._index)

    @staticmethod
    def estimate(count: int, dim: int) -> int:
        """About the bytes a graph of `count` vectors takes: float16 values and M links a
        node on its lowest level (846 bytes a 256-dimension vector at 1M, measured)."""
        return count * (dim * 2 + CONNECTIVITY * 10 + 16)

    def put_many(self, seqs: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors of seqs the graph does not hold (a build), on BUILD_THREADS threads."""
        if len(seqs):
            self._index.add(seqs.astype(np.uint64), vectors, threads=BUILD_THREADS)

    def put(self, seq: int, vector: np.ndarray) -> None:
        self.drop(seq)
        self._index.add(seq, vector)

    def drop(self, seq: int) -> None:
        if seq in self._index:
            self._index.remove(seq)

    def nearest(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        if len(self._index) == 0 or k <= 0:
            return []
        found = self._index.search(vector.astype(np.float32), k, threads=1)
        pairs = zip(found.keys, found.distances, strict=True)
        return [(int(seq), 1.0 - float(distance)) for seq, distance in pairs]

    def save(self, folder: Path) -> None:
        """Write the graph and the log position it holds (each replaced whole, graph first)."""
        folder.mkdir(parents=True, exist_ok=True)
        stem = _stem(folder, self.owner)
        self._index.save(f"{stem}.usearch.part")
        os.replace(f"{stem}.usearch.part", f"{stem}.usearch")
        meta = {
            "owner": self.owner,
            "signature": self.signature,
            "head": change_log.dump(self.head),
        }
        Path(f"{stem}.json.part").write_text(json.dumps(meta))
        os.replace(f"{stem}.json.part", f"{stem}.json")
        self.saved_head = self.head

    @classmethod
    def load(cls, folder: Path, owner: str, signature: str | None) -> TenantGraph | None:
        """The graph saved for this key and signature, or None (none, another model's, or
        unreadable: the caller builds it again)."""
        stem = _stem(folder, owner)
        try:
            meta = json.loads(Path(f"{stem}.json").read_text())
            if meta["owner"] != owner or meta["signature"] != signature:
                return None
            index = _index_class().restore(f"{stem}.usearch")
            head = change_log.load(meta["head"])
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            return None
        if index is None:
            return None
        graph = cls(owner, signature, index.ndim, head)
        index.expansion_search = EXPANSION_SEARCH
        index.expansion_add = EXPANSION_ADD
        graph._index, graph.saved_head = index, graph.head
        return graph
