"""Keyword search for large keys, the candidates side by side (issue 29).

One key of N memories: the development split's LoCoMo turns recombined in pairs, stemmed as
the store stems them (`search_stems`); the 762 development questions as queries, stemmed as
retrieval stems them. Each candidate returns its best POOL matches, one query at a time:

- `fts5`: today's SQLite search (memory_fts's MATCH with the owner's token, bm25, the pool);
- `tantivy`: Tantivy's BM25 (Lucene's design; block-max WAND skips what cannot reach the top);
- `bm25s`: bm25s's sparse matrices (scores every match, vectorised).

Printed: build time, the RSS the index added, p50 / p95 latency, and how many of fts5's top 10
each one's top 10 holds (near-twins tie often, and ties break differently).
Run with `python bench/keyword_candidates.py --sizes 100000 1000000`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_quality import DEVELOPMENT, LOCOMO, turns_of  # noqa: E402
from omniroute.memory.search.fts import match_expression  # noqa: E402
from omniroute.memory.search.query_words import topic_words  # noqa: E402
from omniroute.memory.search.stemming import query_stems, search_stems  # noqa: E402

POOL = 400  # the keyword side's pool: retrieval takes 100 candidates, FTS5 ranks 4 times that
TOP = 10

Search = Callable[[list[str]], list[int]]


def corpus(size: int, seed: int = 7) -> tuple[list[str], list[list[str]]]:
    """`size` memories' stems, and the questions' stems."""
    data = {c["sample_id"]: c for c in json.loads(LOCOMO.read_text())}
    turns = [search_stems(text, "", {}) for name in DEVELOPMENT for _, text in turns_of(data[name])]
    questions = [
        query_stems(topic_words(q["question"]))
        for name in DEVELOPMENT
        for q in data[name]["qa"]
        if q["category"] != 5
    ]
    rng = random.Random(seed)
    return [f"{rng.choice(turns)} {rng.choice(turns)}" for _ in range(size)], questions


def fts5(stems: list[str], folder: Path) -> Search:
    import pysqlite3

    conn = pysqlite3.connect(folder / "fts.db")
    conn.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5(search_stems, fts_owner,"
        " tokenize = 'unicode61 remove_diacritics 2')"
    )
    conn.executemany(
        "INSERT INTO memory_fts (rowid, search_stems, fts_owner) VALUES (?, ?, 'OWNER')",
        enumerate(stems, start=1),
    )
    conn.commit()
    sql = (
        "SELECT rowid FROM memory_fts WHERE memory_fts MATCH ? "
        "ORDER BY bm25(memory_fts, 1.0, 0.0) LIMIT ?"
    )

    def search(query: list[str]) -> list[int]:
        words = match_expression(query)
        if words is None:
            return []
        expression = f'fts_owner : "OWNER" AND search_stems : ({words})'
        return [row[0] for row in conn.execute(sql, (expression, POOL))]

    return search


def tantivy_index(stems: list[str], folder: Path) -> Search:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("stems", tokenizer_name="whitespace", index_option="freq")
    builder.add_integer_field("seq", stored=True, fast=True)
    schema = builder.build()
    index = tantivy.Index(schema, path=str(folder))
    writer = index.writer(heap_size=200_000_000, num_threads=2)
    for seq, text in enumerate(stems, start=1):
        writer.add_document(tantivy.Document(seq=seq, stems=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def search(query: list[str]) -> list[int]:
        if not query:
            return []
        clauses = [
            (tantivy.Occur.Should, tantivy.Query.term_query(schema, "stems", stem))
            for stem in query
        ]
        hits = searcher.search(tantivy.Query.boolean_query(clauses), POOL, count=False).hits
        return [searcher.doc(address)["seq"][0] for _, address in hits]

    return search


def bm25s_index(stems: list[str], folder: Path) -> Search:
    import bm25s

    retriever = bm25s.BM25()
    retriever.index([text.split() for text in stems], show_progress=False)
    vocabulary = retriever.vocab_dict

    def search(query: list[str]) -> list[int]:
        known = [stem for stem in query if stem in vocabulary]
        if not known:
            return []
        found, _ = retriever.retrieve([known], k=POOL, show_progress=False, n_threads=1)
        return [int(doc) + 1 for doc in found[0]]

    return search


CANDIDATES = {"fts5": fts5, "tantivy": tantivy_index, "bm25s": bm25s_index}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=CANDIDATES)
    args = parser.parse_args()
    for size in args.sizes:
        stems, questions = corpus(size)
        print(f"{size:,} memories, {len(questions)} queries, one key; pool {POOL}")
        reference = None
        for name in args.candidates:
            with tempfile.TemporaryDirectory() as folder:
                before = psutil.Process().memory_info().rss
                started = time.perf_counter()
                search = CANDIDATES[name](stems, Path(folder))
                built = time.perf_counter() - started
                added = (psutil.Process().memory_info().rss - before) / 2**20
                timings, tops = [], []
                for query in questions:
                    started = time.perf_counter()
                    tops.append(search(query)[:TOP])
                    timings.append((time.perf_counter() - started) * 1000)
            timings.sort()
            reference = reference or tops
            kept = [
                len(set(top) & set(want)) / len(want)
                for top, want in zip(tops, reference, strict=True)
                if want
            ]
            print(
                f"  {name:9} build {built:7.1f} s  RSS +{added:5.0f} MB"
                f"  p50 {statistics.median(timings):6.2f} ms"
                f"  p95 {timings[int(len(timings) * 0.95) - 1]:6.2f} ms"
                f"  fts5's top 10 kept {statistics.mean(kept):.3f}"
            )


if __name__ == "__main__":
    main()
