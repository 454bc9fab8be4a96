"""Retrieval quality on LoCoMo: evidence recall@1, @5 and @10 per strategy and source, and
what the relevance floor injects.

Every dialogue turn of a conversation becomes one memory of that conversation's key
(content "<speaker>: <text>", plus the image caption; key = the dia_id); every question of
category 1-4 is asked, and recall@k is the share of its evidence turns among the top k.
The injection table takes the default hybrid ranking through the relevance floor and the
2,000-token budget, as the gateway does, and gives the share of evidence injected with the
median number of memories and tokens injected.
The development split (conv-26, -30, -41, -42, -43) is the one to tune on; the held-out
split is printed beside it and never used to choose anything (../shared/bench/README.md).
A table per source gives the default hybrid's recall by question category.
Run with `make bench` or
`python bench/retrieval_quality.py --sources static transformers multilingual`.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import select

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omniroute.core.db import (
    Database,  # noqa: E402
    migrate,  # noqa: E402
)
from omniroute.core.db.tables import memories  # noqa: E402
from omniroute.memory.embedding.cache import CachedEmbedder  # noqa: E402
from omniroute.memory.embedding.model_builds import models_dir  # noqa: E402
from omniroute.memory.embedding.multilingual_model import (  # noqa: E402
    MULTILINGUAL_BUILD,
    MultilingualEmbedder,
)
from omniroute.memory.embedding.sources import Resolution  # noqa: E402
from omniroute.memory.embedding.static_model import (  # noqa: E402
    StaticEmbedder,
    build_default_static,
    default_static_path,
    is_static_model,
)
from omniroute.memory.embedding.transformers_model import TransformersEmbedder  # noqa: E402
from omniroute.memory.life.backfill import Backfill  # noqa: E402
from omniroute.memory.search.budget import within_budget  # noqa: E402
from omniroute.memory.search.change_log import SqliteChangeLog  # noqa: E402
from omniroute.memory.search.fusion import RetrievalOptions  # noqa: E402
from omniroute.memory.search.keyword_cache import KeywordCache  # noqa: E402
from omniroute.memory.search.retrieval import Retriever  # noqa: E402
from omniroute.memory.search.tokens import count_tokens  # noqa: E402
from omniroute.memory.search.vectors import SqliteVecIndex  # noqa: E402
from omniroute.memory.settings import MemoryConfig  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo10.json"
DEVELOPMENT = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")
HELD_OUT = ("conv-44", "conv-47", "conv-48", "conv-49", "conv-50")
KS = (1, 5, 10)
EVIDENCE = re.compile(r"D:?(\d+):0*(\d+)")


class FixedSource:
    """An EmbeddingSources stand-in that always resolves to one embedder."""

    def __init__(self, embedder) -> None:
        self.embedder = CachedEmbedder(embedder, 10_000, 3600)

    def resolve(self, settings) -> Resolution:
        return Resolution(self.embedder)


class Settings:
    def get(self) -> MemoryConfig:
        return MemoryConfig.from_stored({})


def turns_of(conversation: dict) -> list[tuple[str, str]]:
    turns = []
    for name, session in conversation["conversation"].items():
        if name.startswith("session_") and isinstance(session, list):
            for turn in session:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [image: {turn['blip_caption']}]"
                turns.append((normal_id(turn["dia_id"]), text))
    return turns


def normal_id(text: str) -> str:
    """`D8:6`, `D:11:26` and `D08:06` all become `D8:6`."""
    session, turn = EVIDENCE.search(text).groups()
    return f"D{int(session)}:{int(turn)}"


def evidence_of(question: dict) -> set[str]:
    found = EVIDENCE.findall(" ".join(question["evidence"]))
    return {f"D{int(session)}:{int(turn)}" for session, turn in found}


def load_conversation(folder: Path, conversation: dict, embedder) -> Retriever:
    database = Database(f"sqlite:///{folder / (conversation['sample_id'] + '.db')}")
    migrate.upgrade(database)
    index = SqliteVecIndex()
    store = MemoryStore(database, vectors=index)
    owner = conversation["sample_id"]
    with database.write() as conn:
        for key, text in turns_of(conversation):
            store.create(api_key_id=owner, key=key, content=text, connection=conn)
    source = FixedSource(embedder) if embedder is not None else None
    if source is not None:
        Backfill(store, index, source, Settings()).run()
    return Retriever(store, index, source)


def rank(retriever: Retriever, owner: str, question: dict, strategy: str):
    settings = MemoryConfig.from_stored({})
    return retriever.rank(
        api_key_id=owner, query=question["question"], settings=settings, strategy=strategy
    )


def recall(retriever: Retriever, owner: str, question: dict, strategy: str):
    ranking = rank(retriever, owner, question, strategy)
    found = [item.memory.key for item in ranking.items[: max(KS)]]
    wanted = evidence_of(question)
    return [len(wanted & set(found[:k])) / len(wanted) for k in KS]


def injected(retriever: Retriever, owner: str, question: dict, floor: float):
    """(share of the evidence injected, memories injected, their tokens) at this floor."""
    ranking = rank(retriever, owner, question, "hybrid")
    taken = within_budget(ranking.relevant(floor), MemoryConfig.from_stored({}).max_tokens)
    wanted = evidence_of(question)
    share = len(wanted & {memory.key for memory in taken}) / len(wanted)
    return share, len(taken), sum(count_tokens(memory.content) for memory in taken)


def questions(data: dict, split: tuple[str, ...]):
    """(conversation, question) for every scored question of the split."""
    return [
        (sample, question)
        for sample in split
        for question in data[sample]["qa"]
        if question["category"] in (1, 2, 3, 4) and evidence_of(question)
    ]


# Each method: (strategy, the retriever's options, whether the keyword side is the Tantivy
# index large keys get (keyword_cache.py) instead of FTS5).
METHODS = {
    "recent (exact)": ("recent", RetrievalOptions(), False),
    "keyword (FTS5 bm25)": ("keyword", RetrievalOptions(), False),
    "keyword (Tantivy BM25)": ("keyword", RetrievalOptions(), True),
    "semantic": ("semantic", RetrievalOptions(top_k=100), False),
    "hybrid, RRF k=60": ("hybrid", RetrievalOptions(fusion="rrf", top_k=100), False),
    "hybrid, blend 0.5/0.5": ("hybrid", RetrievalOptions(blend_weight=0.5), False),
    "hybrid, blend (default)": ("hybrid", RetrievalOptions(), False),
    "hybrid, blend, Tantivy": ("hybrid", RetrievalOptions(), True),
    "hybrid, blend, top_k 20": ("hybrid", RetrievalOptions(top_k=20), False),
}
# Relevance floors for the injection table: none, around the default, and the default.
FLOORS = sorted({0.0, 0.3, 0.5, RetrievalOptions().relevance_floor})


def with_options(retriever: Retriever, options: RetrievalOptions, indexed: bool) -> Retriever:
    """The retriever with these options; `indexed`, with every key's keyword index built."""
    keywords = None
    if indexed:
        store = retriever.store
        log = SqliteChangeLog("memory_changes")
        keywords = KeywordCache(store.db.read, log, min_memories=1, max_bytes=2**30)
        with store.db.read() as conn:
            owners = conn.execute(select(memories.c.api_key_id).distinct()).scalars().all()
        for owner in owners:
            keywords.search(owner, [], 1)  # starts its build
        keywords.wait()
    return Retriever(
        retriever.store, retriever.index, retriever.sources, options=options, keywords=keywords
    )


def embedder_for(name: str, cache_dir: str):
    if name == "static":
        path = default_static_path(cache_dir)
        if not is_static_model(path):
            build_default_static(cache_dir)
        return StaticEmbedder(path)
    if name == "multilingual":
        path = MULTILINGUAL_BUILD.path(models_dir({"DATA_DIR": cache_dir}))
        if not MULTILINGUAL_BUILD.is_ready(path):
            MULTILINGUAL_BUILD.build(models_dir({"DATA_DIR": cache_dir}))
        return MultilingualEmbedder(path)
    return TransformersEmbedder()


def source_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every bench over the local sources takes: which, and where their built
    models are kept between runs."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--sources", nargs="+", default=["static", "transformers", "multilingual"])
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    return parser


def main() -> None:
    args = source_parser(__doc__.splitlines()[0]).parse_args()
    logging.disable(logging.WARNING)
    data = {c["sample_id"]: c for c in json.loads(LOCOMO.read_text())}
    print("LoCoMo evidence recall (categories 1-4), development split | held-out split")
    print(
        f"{'source':<13} {'method':<26} "
        + "  ".join(f"dev R@{k:<3}" for k in KS)
        + " | "
        + "  ".join(f"held R@{k:<2}" for k in KS)
    )
    for source in args.sources:
        embedder = embedder_for(source, args.cache)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            retrievers = {
                sample: load_conversation(Path(folder), data[sample], embedder)
                for sample in DEVELOPMENT + HELD_OUT
            }
            for method, (strategy, options, indexed) in METHODS.items():
                if source != args.sources[0] and method.startswith(("recent", "keyword")):
                    continue  # the same for every source
                tuned = {
                    sample: with_options(r, options, indexed) for sample, r in retrievers.items()
                }
                row = []
                for split in (DEVELOPMENT, HELD_OUT):
                    scores = [
                        recall(tuned[sample], sample, question, strategy)
                        for sample, question in questions(data, split)
                    ]
                    row.append([sum(s[i] for s in scores) / len(scores) for i in range(len(KS))])
                for retriever in tuned.values():
                    retriever.close()
                    if retriever.keywords is not None:
                        retriever.keywords.close()
                print(
                    f"{source:<13} {method:<26} "
                    + "  ".join(f"{v:>9.3f}" for v in row[0])
                    + " | "
                    + "  ".join(f"{v:>9.3f}" for v in row[1])
                )
            print_categories(source, data, retrievers)
            print_injection(source, data, retrievers)
            for retriever in retrievers.values():
                retriever.store.db.dispose()
        print(f"({source}: {time.perf_counter() - started:.0f} s including embedding)")


# LoCoMo's question categories, as its evaluations name them (5, adversarial, is not scored).
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


def print_categories(source: str, data: dict, retrievers: dict) -> None:
    """The default hybrid's recall per question category, both splits."""
    print(f"{source}: default hybrid by question category")
    print(f"{'category':<16}{'questions':>10} " + "  ".join(f"dev R@{k:<3}" for k in KS)
          + " |" + f"{'questions':>10} " + "  ".join(f"held R@{k:<2}" for k in KS))  # fmt: skip
    for category, name in CATEGORIES.items():
        cells = []
        for split in (DEVELOPMENT, HELD_OUT):
            asked = [(s, q) for s, q in questions(data, split) if q["category"] == category]
            scores = [recall(retrievers[s], s, q, "hybrid") for s, q in asked]
            means = [sum(row[i] for row in scores) / len(scores) for i in range(len(KS))]
            cells.append(f"{len(asked):>10} " + "  ".join(f"{v:>9.3f}" for v in means))
        print(f"{f'{category} {name}':<16}{cells[0]} |{cells[1]}")


def print_injection(source: str, data: dict, retrievers: dict) -> None:
    default = RetrievalOptions().relevance_floor
    print(f"{source}: default hybrid through the relevance floor and the 2,000-token budget")
    print(f"{'floor':<16}{'dev injected':>14}{'memories':>10}{'tokens':>8} |"
          f"{'held injected':>14}{'memories':>10}{'tokens':>8}")  # fmt: skip
    for floor in FLOORS:
        cells = []
        for split in (DEVELOPMENT, HELD_OUT):
            runs = [injected(retrievers[s], s, q, floor) for s, q in questions(data, split)]
            share = sum(run[0] for run in runs) / len(runs)
            count = statistics.median(run[1] for run in runs)
            tokens = statistics.median(run[2] for run in runs)
            cells.append(f"{share:>14.3f}{count:>10.0f}{tokens:>8.0f}")
        label = f"{floor:.2f}" + (" (default)" if floor == default else "")
        print(f"{label:<16}{cells[0]} |{cells[1]}")


if __name__ == "__main__":
    main()
