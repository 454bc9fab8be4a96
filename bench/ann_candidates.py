"""Approximate nearest neighbours for a large key: the candidates side by side (issue 29).

One key of N vectors of the static model (256 dimensions): the LoCoMo development split's
turns, embedded, and recombined as the latency bench recombines its sentences (two turns'
vectors summed and normalised: the static model averages token vectors, so this is close to
embedding the two texts together). The queries are the development split's questions,
embedded; the truth is numpy's exact cosine top 10. Each candidate builds its index with two
threads, then answers the queries one at a time on one thread (as a request would):

- `exact`: the float32 matrix and a matrix-vector product (what vector_cache does today);
- `usearch-f16`, `usearch-i8`: usearch's HNSW with float16 or int8 vectors;
- `hnswlib`: hnswlib's HNSW (float32 only; an sdist that needs a C++ compiler, so not in
  requirements: `pip install hnswlib==0.8.0` to compare it).

Printed per candidate: the build time, query p50 / p95 in ms, recall@10 against exact, and
the RSS the index added. Run with `python bench/ann_candidates.py --sizes 100000 1000000`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
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
# HNSW's M and ef_construction (--m, --ef-construction)
GRAPH = {"m": 16, "ef_construction": 128}


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
    """The exact top K of each query, fifty queries at a time (a million scores each)."""
    found = []
    for start in range(0, len(queries), 50):
        scores = queries[start : start + 50] @ vectors.T
        top = np.argpartition(-scores, K, axis=1)[:, :K]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
        found.append(np.take_along_axis(top, order, axis=1))
    return np.concatenate(found)


def exact(vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    def search(query: np.ndarray, ef: int) -> np.ndarray:
        scores = vectors @ query
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]

    return search


def usearch_index(vectors: np.ndarray, dtype: str) -> Callable[[np.ndarray, int], np.ndarray]:
    from usearch.index import Index

    index = Index(
        ndim=vectors.shape[1], metric="cos", dtype=dtype, connectivity=GRAPH["m"],
        expansion_add=GRAPH["ef_construction"],
    )  # fmt: skip
    index.add(np.arange(len(vectors)), vectors, threads=2)

    def search(query: np.ndarray, ef: int) -> np.ndarray:
        index.expansion_search = ef
        return index.search(query, K, threads=1).keys

    return search


def hnswlib_index(vectors: np.ndarray) -> Callable[[np.ndarray, int], np.ndarray]:
    import hnswlib

    index = hnswlib.Index(space="cosine", dim=vectors.shape[1])
    index.init_index(len(vectors), ef_construction=GRAPH["ef_construction"], M=GRAPH["m"])
    index.add_items(vectors, np.arange(len(vectors)), num_threads=2)
    index.set_num_threads(1)

    def search(query: np.ndarray, ef: int) -> np.ndarray:
        index.set_ef(ef)
        return index.knn_query(query, k=K)[0][0]

    return search


CANDIDATES = {
    "exact": exact,
    "usearch-f16": lambda v: usearch_index(v, "f16"),
    "usearch-i8": lambda v: usearch_index(v, "i8"),
    "hnswlib": hnswlib_index,
}


def measure(
    name: str, vectors: np.ndarray, queries: np.ndarray, expected: np.ndarray, efs: list[int]
) -> list[str]:
    try:
        importlib.import_module({"exact": "numpy", "hnswlib": "hnswlib"}.get(name, "usearch"))
    except ImportError:
        return [f"{name:<12} not installed"]
    gc.collect()
    process = psutil.Process()
    before = process.memory_info().rss
    started = time.perf_counter()
    search = CANDIDATES[name](vectors)
    built = time.perf_counter() - started
    added = (process.memory_info().rss - before) / 2**20
    lines = []
    for ef in efs if name != "exact" else efs[:1]:
        times, hits = [], 0
        for query, wanted in zip(queries, expected, strict=True):
            started = time.perf_counter()
            found = search(query, ef)
            times.append((time.perf_counter() - started) * 1000)
            hits += len({int(i) for i in found} & {int(i) for i in wanted})
        p95 = statistics.quantiles(times, n=20)[-1]
        recall = hits / (K * len(queries))
        shown = "" if name == "exact" else f"ef {ef:<4}"
        lines.append(
            f"{name:<12} {shown:<8} build {built:6.1f} s  p50 {statistics.median(times):6.2f} ms  "
            f"p95 {p95:6.2f} ms  recall@10 {recall:.3f}  RSS +{added:5.0f} MB"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[100_000])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--ef", nargs="+", type=int, default=[64, 256, 1024])
    parser.add_argument("--m", type=int, default=GRAPH["m"])
    parser.add_argument("--ef-construction", type=int, default=GRAPH["ef_construction"])
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    GRAPH.update(m=args.m, ef_construction=args.ef_construction)
    embedder = embedder_for("static", args.cache)
    for size in args.sizes:
        vectors, queries = corpus(embedder, size)
        expected = truth(vectors, queries)
        print(
            f"{size:,} vectors of {vectors.shape[1]} dims, {len(queries)} queries, one key;"
            f" M {GRAPH['m']}, ef_construction {GRAPH['ef_construction']}"
        )
        with threadpool_limits(1):  # one BLAS thread, as vector_cache searches
            for name in args.candidates:
                for line in measure(name, vectors, queries, expected, args.ef):
                    print("  " + line, flush=True)


if __name__ == "__main__":
    main()
