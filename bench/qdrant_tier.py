"""The Qdrant tier beside the local index: LoCoMo recall, and retrieval latency in one key.

Vectors come from the static source; the same memories are searched with the vector side
from sqlite-vec and from Qdrant (qdrant-client's local mode, in memory: no server can be
installed here). Recall is evidence recall@10 over LoCoMo's development split (held-out in
brackets, never used to choose). Latency is one full `rank` per question, query embedding
included, at each size of one key. Local mode scans every point in Python and evaluates the
payload filter per point: its latency is not a Qdrant server's (an HNSW index with a tenant
payload index; Qdrant publishes single-digit millisecond searches at millions of points).
Run with `make bench` or `python bench/qdrant_tier.py --sizes 10000 100000`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_latency import Uncached, grow  # noqa: E402
from bench.retrieval_quality import (  # noqa: E402
    DEVELOPMENT,
    HELD_OUT,
    LOCOMO,
    FixedSource,
    embedder_for,
    evidence_of,
    turns_of,
)
from omniroute.core.db import (
    Database,  # noqa: E402
    migrate,  # noqa: E402
)
from omniroute.core.db.settings_store import SettingsStore  # noqa: E402
from omniroute.core.sealed import SecretBox  # noqa: E402
from omniroute.memory.life.backfill import Backfill  # noqa: E402
from omniroute.memory.qdrant.config import QdrantSettings  # noqa: E402
from omniroute.memory.qdrant.connection import QdrantConnection  # noqa: E402
from omniroute.memory.qdrant.index import QdrantIndex  # noqa: E402
from omniroute.memory.qdrant.outbox import QdrantOutbox  # noqa: E402
from omniroute.memory.qdrant.sync import QdrantSync  # noqa: E402
from omniroute.memory.qdrant.tier import QdrantTier  # noqa: E402
from omniroute.memory.search.retrieval import Retriever  # noqa: E402
from omniroute.memory.search.vectors import SqliteVecIndex  # noqa: E402
from omniroute.memory.settings import MemorySettings  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402

TIERS = ("sqlite-vec", "qdrant")


class Engine:
    """A store whose writes are mirrored to Qdrant local mode, and a retriever over both."""

    def __init__(self, folder: str, source) -> None:
        self.db = Database(f"sqlite:///{folder}/bench.db")
        migrate.upgrade(self.db)
        settings = SettingsStore(self.db)
        self.memory_settings = MemorySettings(settings)
        qdrant_settings = QdrantSettings(settings, SecretBox("bench"), {"QDRANT_PATH": ":memory:"})
        qdrant_settings.update({"enabled": True})
        outbox = QdrantOutbox(self.db, enabled=lambda: True)
        index = SqliteVecIndex()
        self.store = MemoryStore(self.db, vectors=index, mirror=outbox)
        self.backfill = Backfill(self.store, index, source, self.memory_settings)
        connection = QdrantConnection(allow_local=True, search_timeout=60)
        self.sync = QdrantSync(
            self.store, outbox, QdrantIndex(connection), qdrant_settings,
            self.memory_settings, source, settings,
        )  # fmt: skip
        self.retriever = Retriever(
            self.store, index, source, qdrant=QdrantTier(self.sync, retry_seconds=30)
        )

    def load(self) -> tuple[float, float]:
        """Embed into both tiers; the seconds each took."""
        started = time.perf_counter()
        self.backfill.run()
        local = time.perf_counter() - started
        started = time.perf_counter()
        self.sync.run()
        return local, time.perf_counter() - started

    def rank(self, owner: str, query: str, strategy: str, tier: str):
        settings = dataclasses.replace(
            self.memory_settings.get(), vector_store="qdrant" if tier == "qdrant" else "auto"
        )
        ranking = self.retriever.rank(
            api_key_id=owner, query=query, settings=settings, strategy=strategy
        )
        wanted = "qdrant" if tier == "qdrant" else "sqlite-vec"
        assert ranking.vector_store == wanted, ranking.fallback_reason
        return ranking

    def close(self) -> None:
        self.retriever.close()
        self.sync.index.connection.close()
        self.db.dispose()


def recall(args, embedder) -> None:
    data = {c["sample_id"]: c for c in json.loads(LOCOMO.read_text())}
    with tempfile.TemporaryDirectory() as folder:
        engine = Engine(folder, FixedSource(embedder))
        with engine.db.write() as conn:
            for sample in DEVELOPMENT + HELD_OUT:
                for key, text in turns_of(data[sample]):
                    engine.store.create(api_key_id=sample, key=key, content=text, connection=conn)
        local, remote = engine.load()
        print(
            f"LoCoMo, static source: loaded in {local:.0f} s (sqlite-vec), {remote:.0f} s (Qdrant)"
        )
        print(f"{'strategy':<10}{'tier':<12}{'dev R@10':>10}{'held R@10':>11}")
        for strategy in ("semantic", "hybrid"):
            for tier in TIERS:
                row = []
                for split in (DEVELOPMENT, HELD_OUT):
                    scores = []
                    for sample in split:
                        for question in data[sample]["qa"]:
                            wanted = evidence_of(question)
                            if question["category"] not in (1, 2, 3, 4) or not wanted:
                                continue
                            ranking = engine.rank(sample, question["question"], strategy, tier)
                            top = {item.memory.key for item in ranking.items[:10]}
                            scores.append(len(wanted & top) / len(wanted))
                    row.append(sum(scores) / len(scores))
                print(f"{strategy:<10}{tier:<12}{row[0]:>10.3f}{row[1]:>11.3f}")
        engine.close()


def latency(args, embedder) -> None:
    rng = random.Random(5)
    data = [c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] in DEVELOPMENT]
    sentences = [text.split(": ", 1)[1] for c in data for _, text in turns_of(c)]
    questions = [q["question"] for c in data for q in c["qa"] if q["category"] in (1, 2, 3, 4)]
    with tempfile.TemporaryDirectory() as folder:
        engine = Engine(folder, Uncached(embedder))
        print("retrieval latency, one key, static source (query embedding included), ms")
        print(
            f"{'memories':<10}{'tier':<12}"
            + "".join(f"{s + ' p50':>15}{s + ' p95':>15}" for s in ("semantic", "hybrid"))
        )
        size = 0
        for target in sorted(args.sizes):
            grow(engine.store, "big", sentences, size, target, rng)
            size = target
            local, remote = engine.load()
            for tier in TIERS:
                repeat = (
                    args.repeat if tier == "sqlite-vec" else max(10, args.repeat * 1000 // size)
                )
                cells = []
                for strategy in ("semantic", "hybrid"):
                    timings = []
                    for number in range(repeat):
                        started = time.perf_counter()
                        engine.rank("big", questions[number % len(questions)], strategy, tier)
                        timings.append((time.perf_counter() - started) * 1000)
                    timings.sort()
                    cells.append(
                        (statistics.median(timings), timings[max(int(len(timings) * 0.95) - 1, 0)])
                    )
                loaded = local if tier == "sqlite-vec" else remote
                print(
                    f"{size:<10,}{tier:<12}"
                    + "".join(f"{p50:>15.1f}{p95:>15.1f}" for p50, p95 in cells)
                    + f"   (loaded in {loaded:.0f} s, {repeat} queries)"
                )
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--skip-recall", action="store_true")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    embedder = embedder_for("static", args.cache)
    if not args.skip_recall:
        recall(args, embedder)
    latency(args, embedder)


if __name__ == "__main__":
    main()
