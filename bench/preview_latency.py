"""`POST /api/memory/retrieve-preview` as a user calls it: p50 / p95 for a 1k key and a 100k key
beside it, and their ratio (issue 29's targets: p95 25 ms at 100k, at most 2.5 times the 1k).

A new data dir, memory on with the static source, hybrid, `limit` 10; the memories are LoCoMo
development turns recombined in pairs, written through the store and embedded as the worker
would; the large key's RAM copies (keyword index, vector graph) are built before it is timed,
as a process serving it a while would have them. The requests go through the app's WSGI stack
with Flask's test client (routing, auth, schema, ranking, explanation, JSON); the HTTP server
in front adds about a tenth of a millisecond. Run with `python bench/preview_latency.py`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.retrieval_latency import grow  # noqa: E402
from bench.retrieval_quality import DEVELOPMENT, LOCOMO, embedder_for, turns_of  # noqa: E402
from bench.stores import STORES, database_url  # noqa: E402
from omniroute.factory import create_app  # noqa: E402
from omniroute.memory.embedding.static_model import default_static_path  # noqa: E402
from omniroute.memory.search import key_copies  # noqa: E402

ADMIN = {"Authorization": "Bearer bench-admin-token"}


def timings(client, key: str, questions: list[str], repeat: int) -> list[float]:
    found = []
    for number in range(repeat):
        body = {"apiKeyId": key, "query": questions[number % len(questions)],
                "strategy": "hybrid", "limit": 10}  # fmt: skip
        started = time.perf_counter()
        response = client.post("/api/memory/retrieve-preview", json=body, headers=ADMIN)
        found.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, response.text
    return sorted(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    embedder_for("static", args.cache)  # the static model, built once
    data = [c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] in DEVELOPMENT]
    sentences = [text.split(": ", 1)[1] for c in data for _, text in turns_of(c)]
    questions = [q["question"] for c in data for q in c["qa"] if q["category"] in (1, 2, 3, 4)]
    with tempfile.TemporaryDirectory() as folder, database_url(args.store, folder) as url:
        os.environ["MEMORY_STATIC_MODEL"] = str(default_static_path(args.cache))
        app = create_app({"DATA_DIR": folder, "DATABASE_URL": url, "LOG_LEVEL": "WARNING",
                          "OMNIROUTE_ADMIN_TOKEN": "bench-admin-token"})  # fmt: skip
        svc = app.extensions["omniroute"]
        svc.memory_settings.update({"enabled": True, "staticEnabled": True,
                                    "embeddingSource": "static"})  # fmt: skip
        small, large = svc.keys.create("1k")[0].id, svc.keys.create("large")[0].id
        rng = random.Random(7)
        grow(svc.memories, small, sentences, 0, 1_000, rng)
        grow(svc.memories, large, sentences, 0, args.large, rng)
        svc.backfill.run(batch_size=1024)
        key_copies.RECHECK_SECONDS = 0
        client = app.test_client()
        timings(client, large, questions, 3)  # starts the large key's copies
        svc.vectors.cache.wait()
        svc.retriever.keywords.wait()
        print(f"retrieve-preview on {args.store} (hybrid, static source, limit 10), ms")
        figures = {}
        for name, key in (("1k", small), (f"{args.large // 1000}k", large)):
            timings(client, key, questions, 20)  # warm
            found = timings(client, key, questions, args.repeat)
            figures[name] = (statistics.median(found), found[int(len(found) * 0.95) - 1])
            print(f"  {name:>6} key: p50 {figures[name][0]:6.2f}  p95 {figures[name][1]:6.2f}")
        (small_p50, small_p95), (large_p50, large_p95) = figures.values()
        ratio = f"p50 {large_p50 / small_p50:.2f}x  p95 {large_p95 / small_p95:.2f}x"
        print(f"  ratio large / 1k: {ratio}")
        svc.close()


if __name__ == "__main__":
    main()
