"""Approximate nearest neighbours for a large key: the candidates side by side (issue 29).

One key of N vectors of the static model (256 dimensions): the LoCoMo development split's
turns, embedded, and recombined as the latency bench recombines its sentences (two turns'
vectors summed and normalised: the static model averages token vectors, so this is close to
embedding the two texts together). The queries are the development split's questions,
embedded; the truth is numpy's exact cosine top 10. Each candidate builds its index with two
threads, then answers the queries one at a time on one thread (as a request would):

- `exact`: the float32 matrix and a matrix-vector product (what vector_cache does today);
- `usearch-f16`, `usearch-i8`: usearch's HNSW with float16 or int8 vectors;
- `hnswlib`: hnswlib's HNSW (float32 only).

Printed per candidate: the build time, query p50 / p95 in ms, recall@10 against exact, and
the RSS the index added. Run with `python bench/ann_candidates.py --sizes 100000 1000000`.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_quality import DEVELOPMENT, LOCOMO, embedder_for, turns_of  # noqa: E402

K = 10
CONNECTIVITY = 16  # HNSW's M
EXPANSION_ADD = 128  # ef_construction
EXPANSION_SEARCH = 64  # ef at query time


def corpus(embedder, size: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
    """`size` unit vectors recombined from the development turns, and the questions'."""
    data = {c["sample_id"]: c for c in json.loads(LOCOMO.read_text())}
    turns = [text for name in DEVELOPMENT for _, text in turns_of(data[name])]
    questions = [
        q["question"] for name in DEVELOPMENT for q in data[name]["qa"] if q["category"] != 5
    ]
    base = np.asarray(embedder.embed(turns), dtype=np.float32)
    rng = np.random.default_rng(seed)
    vectors = np.empty((size, base.shape[1]), dtype=np.float32)
    for start in range(0, size, 100_000):
        stop = min(size, start + 100_000)
        pairs = rng.integers(0, len(base), size=(stop - start, 2))
        block = base[pairs[:, 0]] + base[pairs[:, 1]]
        vectors[start:stop] = block / np.linalg.norm(block, axis=1, keepdims=True)
    queries = np.asarray(embedder.embed(questions), dtype=np.float32)
    return vectors, queries / np.linalg.norm(queries, axis=1, keepdims=True)


def truth(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = queries @ vectors.T if len(vectors) <= 200_000 else _blocked(vectors, queries)
    return np.argsort(-scores, axis=1)[:, :K]


def _blocked(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = np.empty((len(queries), len(vectors)), dtype=np.float32)
    for start in range(0, len(vectors), 200_000):
        scores[:, start : start + 200_000] = queries @ vectors[start : start + 200_000].T
    return scores


def exact(vectors: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def search(query: np.ndarray) -> np.ndarray:
        scores = vectors @ query
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]

    return search


def usearch_index(vectors: np.ndarray, dtype: str) -> Callable[[np.ndarray], np.ndarray]:
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1], metric="cos", dtype=dtype, connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH,
    )  # fmt: skip
    index.add(np.arange(len(vectors)), vectors, threads=2)

    def search(query: np.ndarray) -> np.ndarray:
        return index.search(query, K, threads=1).keys

    return search


def hnswlib_index(vectors: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    import hnswlib

    index = hnswlib.Index(space="cosine", dim=vectors.shape[1])
    index.init_index(len(vectors), ef_construction=EXPANSION_ADD, M=CONNECTIVITY)
    index.add_items(vectors, np.arange(len(vectors)), num_threads=2)
    index.set_ef(EXPANSION_SEARCH)
    index.set_num_threads(1)

    def search(query: np.ndarray) -> np.ndarray:
        return index.knn_query(query, k=K)[0][0]

    return search


CANDIDATES = {
    "exact": exact,
    "usearch-f16": lambda v: usearch_index(v, "f16"),
    "usearch-i8": lambda v: usearch_index(v, "i8"),
    "hnswlib": hnswlib_index,
}


def measure(name: str, vectors: np.ndarray, queries: np.ndarray, expected: np.ndarray) -> str:
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    search = CANDIDATES[name](vectors)
    built = time.perf_counter() - started
    added = (process.memory_info().rss - before) / 2**20
    times, hits = [], 0
    for query, wanted in zip(queries, expected, strict=True):
        started = time.perf_counter()
        found = search(query)
        times.append((time.perf_counter() - started) * 1000)
        hits += len(set(int(i) for i in found) & set(int(i) for i in wanted))
    p95 = statistics.quantiles(times, n=20)[-1]
    recall = hits / (K * len(queries))
    return (
        f"{name:<12} build {built:7.1f} s  p50 {statistics.median(times):6.2f} ms  "
        f"p95 {p95:6.2f} ms  recall@10 {recall:.3f}  RSS +{added:6.0f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100_000])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    embedder = embedder_for("static", args.cache)
    for size in args.sizes:
        vectors, queries = corpus(embedder, size)
        expected = truth(vectors, queries)
        print(f"{size:,} vectors of {vectors.shape[1]} dims, {len(queries)} queries, one key")
        with threadpool_limits(1):  # one BLAS thread, as vector_cache searches
            for name in args.candidates:
                print("  " + measure(name, vectors, queries, expected), flush=True)


if __name__ == "__main__":
    main()
