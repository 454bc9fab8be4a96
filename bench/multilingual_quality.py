"""Retrieval in Dutch and German: is each fact found by a paraphrased question in its own
language, among English dialogue turns?

bench/multilingual_facts.json holds 120 facts (60 Dutch, 60 German), each with a question
as a user would ask for it, in other words than the fact's. All 120 go into one key with
400 English LoCoMo turns (the first of the development conversations) as distractors; each
question is asked through the retriever as the gateway asks it, and hit@k is the share of
questions whose fact is among the top k. The odd-numbered facts are the development half
(choose on it); the even-numbered ones the held-out half, only printed.
Run with `make bench` or `python bench/multilingual_quality.py --sources static multilingual`.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_quality import (  # noqa: E402
    DEVELOPMENT,
    LOCOMO,
    FixedSource,
    Settings,
    embedder_for,
    source_parser,
    turns_of,
)
from omniroute.core.db import Database, migrate  # noqa: E402
from omniroute.memory.life.backfill import Backfill  # noqa: E402
from omniroute.memory.search.retrieval import Retriever  # noqa: E402
from omniroute.memory.search.vectors import SqliteVecIndex  # noqa: E402
from omniroute.memory.settings import MemoryConfig  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402

FACTS = Path(__file__).resolve().parent / "multilingual_facts.json"
DISTRACTORS = 400
KS = (1, 3, 10)
STRATEGIES = ("keyword", "semantic", "hybrid")
HALVES = ("development", "held-out")


def load_key(folder: Path, facts: list[dict], embedder) -> Retriever:
    database = Database(f"sqlite:///{folder / 'multilingual.db'}")
    migrate.upgrade(database)
    index = SqliteVecIndex()
    store = MemoryStore(database, vectors=index)
    conversations = [c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] in DEVELOPMENT]
    turns = [text for c in conversations for _, text in turns_of(c)][:DISTRACTORS]
    with database.write() as conn:
        for number, text in enumerate(turns):
            store.create(api_key_id="team", key=f"turn-{number}", content=text, connection=conn)
        for fact in facts:
            store.create(api_key_id="team", key=fact["id"], content=fact["fact"], connection=conn)
    source = FixedSource(embedder) if embedder is not None else None
    if source is not None:
        Backfill(store, index, source, Settings()).run()
    return Retriever(store, index, source)


def hits(retriever: Retriever, fact: dict, strategy: str) -> list[bool]:
    ranking = retriever.rank(
        api_key_id="team",
        query=fact["question"],
        settings=MemoryConfig.from_stored({}),
        strategy=strategy,
    )
    found = [item.memory.key for item in ranking.items[: max(KS)]]
    return [fact["id"] in found[:k] for k in KS]


def main() -> None:
    parser = source_parser(__doc__.splitlines()[0])
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    facts = json.loads(FACTS.read_text(encoding="utf-8"))["facts"]
    print(f"Dutch and German facts among {DISTRACTORS} English turns: hit@k, "
          "development half | held-out half")  # fmt: skip
    print(f"{'source':<13} {'strategy':<9} " + " | ".join(
        "  ".join(f"{half[:4]} @{k:<2}" for k in KS) for half in HALVES))  # fmt: skip
    for source in args.sources:
        embedder = embedder_for(source, args.cache)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            retriever = load_key(Path(folder), facts, embedder)
            for strategy in STRATEGIES:
                if strategy == "keyword" and source != args.sources[0]:
                    continue  # the same for every source
                cells = []
                for half in HALVES:
                    asked = [f for f in facts if f["split"] == half]
                    found = [hits(retriever, fact, strategy) for fact in asked]
                    cells.append("  ".join(
                        f"{sum(row[i] for row in found) / len(found):>8.3f}" for i in range(len(KS))
                    ))  # fmt: skip
                print(f"{source:<13} {strategy:<9} " + " | ".join(cells))
            retriever.close()
            retriever.store.db.dispose()
        print(f"({source}: {time.perf_counter() - started:.0f} s including embedding)")


if __name__ == "__main__":
    main()
