"""Retrieval latency: p50 and p95 per strategy, query embedding included (static source).

One key grows to 1k, 10k, 100k and 1M memories (LoCoMo sentences, recombined), and a small
key of 100 memories sits beside the largest. The service's RAM copies of a large key are
built before its figures are taken, at the default settings: keyword indexes (Tantivy, from
10k memories, both stores), and on SQLite vector matrices (from 5k) and graphs (from 20k).
Every figure is one full `rank` + budget call, as the proxy makes it (global memories
included, as at the default globalBudgetPercent), with the query embedded each time (the
embedding cache is bypassed). A last table measures scopes: one end user among `--users` of
a key (10 memories each, 100 shared by the key), and what asking for global memories costs
with none and with 100 of them. Each size also prints how long the
embedding and the copies took, and the process's RSS.
Targets on a 2-core machine (issue 29): SQLite hybrid p95 5 / 15 / 40 ms at 1k / 100k / 1M.
Run with `make bench` or `python bench/retrieval_latency.py --store postgresql --sizes 10000`.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_quality import (  # noqa: E402
    DEVELOPMENT,
    LOCOMO,
    Settings,
    embedder_for,
    turns_of,
)
from bench.stores import STORES, database_url, keyword_cache, vector_index  # noqa: E402
from omniroute.core.db import (
    Database,  # noqa: E402
    migrate,  # noqa: E402
)
from omniroute.memory.embedding.sources import Resolution  # noqa: E402
from omniroute.memory.life.backfill import Backfill  # noqa: E402
from omniroute.memory.search import key_copies  # noqa: E402
from omniroute.memory.search.budget import within_budget  # noqa: E402
from omniroute.memory.search.retrieval import STRATEGIES, Retriever  # noqa: E402
from omniroute.memory.settings import MemoryConfig  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402


class Uncached:
    """Resolves to the embedder itself: every query is embedded, as a new question would be."""

    def __init__(self, embedder) -> None:
        self.embedder = embedder

    def resolve(self, settings) -> Resolution:
        return Resolution(self.embedder)


def grow(
    store: MemoryStore, owner: str, sentences: list[str], start: int, stop: int, rng, user=""
) -> None:
    with store.db.write() as conn:
        for number in range(start, stop):
            text = f"{rng.choice(sentences)} {rng.choice(sentences)}"
            store.create(
                api_key_id=owner, key=f"m{number}", content=text, user_id=user, connection=conn
            )


def measure(
    retriever: Retriever,
    owner: str,
    questions: list[str],
    strategy: str,
    repeat: int,
    user_id: str = "",
    include_global: bool = True,
):
    settings = MemoryConfig.from_stored({})
    timings = []
    for number in range(repeat):
        started = time.perf_counter()
        ranking = retriever.rank(
            api_key_id=owner,
            query=questions[number % len(questions)],
            settings=settings,
            strategy=strategy,
            user_id=user_id,
            include_global=include_global,
        )
        within_budget([item.memory for item in ranking.items], settings.max_tokens)
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1]


def warm(retriever: Retriever, index) -> float:
    """Let a large key's RAM copies (vectors and keywords) be built, as the first searches
    of a process would; the seconds it took."""
    started = time.perf_counter()
    recheck, key_copies.RECHECK_SECONDS = key_copies.RECHECK_SECONDS, 0  # the key grew fast
    retriever.rank(
        api_key_id="big", query="warm", settings=MemoryConfig.from_stored({}), strategy="hybrid"
    )
    if index.cache is not None:
        index.cache.wait()
    retriever.keywords.wait()
    # Left at 0, every search of a key below the copies' sizes would count it again in the
    # background, as no process does (it inflated the 1k and small-key figures by 2 ms).
    key_copies.RECHECK_SECONDS = recheck
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10_000, 100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--users", type=int, default=10_000, help="end users of the scopes' key")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    rng = random.Random(5)
    data = [c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] in DEVELOPMENT]
    sentences = [text.split(": ", 1)[1] for c in data for _, text in turns_of(c)]
    questions = [q["question"] for c in data for q in c["qa"] if q["category"] in (1, 2, 3, 4)]
    embedder = embedder_for("static", args.cache)
    strategies = STRATEGIES

    with tempfile.TemporaryDirectory() as folder, database_url(args.store, folder) as url:
        database = Database(url)
        migrate.upgrade(database)
        index = vector_index(database, Path(folder) / "graphs")
        store = MemoryStore(database, vectors=index)
        source = Uncached(embedder)
        backfill = Backfill(store, index, source, Settings())
        retriever = Retriever(store, index, source, keywords=keyword_cache(database))
        print(f"retrieval latency on {args.store}, static source (query embedding included), ms")
        print(
            f"{'memories in the key':<28}"
            + "".join(f"{s + ' p50':>15}{s + ' p95':>15}" for s in strategies)
        )
        size = 0
        for target in sorted(args.sizes):
            grow(store, "big", sentences, size, target, rng)
            size = target
            started = time.perf_counter()
            backfill.run(batch_size=1024)
            loaded = time.perf_counter() - started
            built = warm(retriever, index)
            figures = [measure(retriever, "big", questions, s, args.repeat) for s in strategies]
            row = "".join(f"{p50:>15.2f}{p95:>15.2f}" for p50, p95 in figures)
            print(f"{f'{size:,}':<28}{row}")
            rss = psutil.Process().memory_info().rss / 2**20
            print(f"    embedded in {loaded:.0f} s, RAM copies built in {built:.0f} s", end="")
            print(f", RSS {rss:,.0f} MB")
        grow(store, "small", sentences, 0, 100, rng)
        backfill.run()
        figures = [measure(retriever, "small", questions, s, args.repeat) for s in strategies]
        row = "".join(f"{p50:>15.2f}{p95:>15.2f}" for p50, p95 in figures)
        print(f"{f'100 beside {size:,}':<28}{row}")
        scopes(store, backfill, retriever, sentences, questions, args, rng)
        if index.cache is not None:
            index.cache.close()
        retriever.keywords.close()
        database.dispose()


def scopes(store, backfill, retriever, sentences, questions, args, rng) -> None:
    """One end user among many of a key, and the cost of asking for global memories."""
    grow(store, "team", sentences, 0, 100, rng)
    started = time.perf_counter()
    for user in range(args.users):
        grow(store, "team", sentences, 0, 10, rng, user=f"user-{user}")
    backfill.run(batch_size=1024)
    took = time.perf_counter() - started
    size = (
        f", database file {Path(store.db.path).stat().st_size / 2**20:,.0f} MB"
        if store.db.path
        else ""
    )
    print(f"scopes: {args.users:,} end users x 10 memories + 100 shared, written and embedded "
          f"in {took:.0f} s{size}")  # fmt: skip
    before = [
        ("100, no global asked", "small", "", False),
        ("100 + global, none exist", "small", "", True),
    ]
    after = [
        ("100 + 100 global", "small", "", True),
        ("user: 10 own + 100 shared", "team", "user-7", True),
        ("key's 100 shared, no user", "team", "", True),
    ]
    for cases in (before, after):
        for label, owner, user, with_global in cases:
            figures = [
                measure(retriever, owner, questions, s, args.repeat, user, with_global)
                for s in STRATEGIES
            ]
            row = "".join(f"{p50:>15.2f}{p95:>15.2f}" for p50, p95 in figures)
            print(f"{label:<28}{row}")
        if cases is before:
            grow(store, "", sentences, 0, 100, rng)  # 100 global memories from here on
            backfill.run()


if __name__ == "__main__":
    main()
