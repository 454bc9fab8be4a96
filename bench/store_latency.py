"""Latency of the memory store, SQLite or PostgreSQL: median and p95 per operation.

Two tenants of N memories each (default 10,000); every figure is for one call from Python,
the way the API and the proxy call the store. Then the add throughput through the REST API
(POST /api/memory, one memory a request, through Flask's test client). Run with
`make bench` or `python bench/store_latency.py --store postgresql --memories 10000`.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stores import STORES, database_url  # noqa: E402
from omniroute.core.db import (
    Database,  # noqa: E402
    migrate,  # noqa: E402
)
from omniroute.factory import create_app  # noqa: E402
from omniroute.memory.listing import list_page  # noqa: E402
from omniroute.memory.model import MemoryFilter  # noqa: E402
from omniroute.memory.search.fts import keyword_search  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402

WORDS = (
    "python rust typescript postgres sqlite redis docker kubernetes neovim helix coffee tea "
    "hiking climbing berlin amsterdam tokyo deadline invoice budget review deploy release "
    "meeting sprint design testing coverage lunch dinner vegetarian allergy peanut cat dog"
).split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))).capitalize() + "."


def populate(store: MemoryStore, owner: str, count: int, rng: random.Random) -> list[str]:
    ids = []
    with store.db.write() as conn:
        for number in range(count):
            memory, _ = store.create(
                api_key_id=owner,
                key=f"fact:{number}",
                content=sentence(rng),
                type=rng.choice(["factual", "episodic"]),
                connection=conn,
            )
            ids.append(memory.id)
    return ids


def measure(operation: Callable[[], object], repeat: int) -> tuple[float, float]:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        operation()
        timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    return statistics.median(timings), timings[int(len(timings) * 0.95) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--api-adds", type=int, default=1000)
    args = parser.parse_args()
    rng = random.Random(7)

    with tempfile.TemporaryDirectory() as folder, database_url(args.store, folder) as url:
        database = Database(url)
        migrate.upgrade(database)
        store = MemoryStore(database)
        started = time.perf_counter()
        ids = populate(store, "alice", args.memories, rng)
        populate(store, "bob", args.memories, rng)
        load_s = time.perf_counter() - started

        def keyword(query: str) -> Callable[[], object]:
            def run() -> object:
                with database.read() as conn:
                    return keyword_search(
                        conn, owners=("alice",), query=query, now_iso=store.now(), limit=20
                    )

            return run

        counter = iter(range(10**9))
        operations = {
            "create (new key)": lambda: store.create(
                api_key_id="alice", key=f"new:{next(counter)}", content=sentence(rng)
            ),
            "create (upsert existing key)": lambda: store.create(
                api_key_id="alice", key=f"fact:{rng.randrange(args.memories)}", content="x y z"
            ),
            "get (cached)": lambda: store.get(ids[0]),
            "get (uncached)": lambda: store.get(ids[rng.randrange(1, len(ids))]),
            "list page 1, limit 50, with stats": lambda: list_page(
                store, MemoryFilter(api_key_id="alice")
            ),
            "list q= substring": lambda: list_page(
                store, MemoryFilter(api_key_id="alice", text="coffee tea")
            ),
            "keyword search, 1 word": keyword("kubernetes"),
            "keyword search, question": keyword("where did I go hiking with my dog in tokyo?"),
            "record access of 10": lambda: store.record_access(dict.fromkeys(ids[:10], 1)),
        }
        print(
            f"memory store on {args.store}, {args.memories:,} memories in each of 2 keys "
            f"(loaded in {load_s:.1f} s), {args.repeat} calls each"
        )
        print(f"{'operation':<36} {'median ms':>10} {'p95 ms':>10}")
        for name, operation in operations.items():
            median, p95 = measure(operation, args.repeat)
            print(f"{name:<36} {median:>10.2f} {p95:>10.2f}")
        database.dispose()
        api_adds(folder, url, args.api_adds, rng)


def api_adds(folder: str, url: str, count: int, rng: random.Random) -> None:
    """POST /api/memory `count` times for one key: memories added a second, and the median."""
    app = create_app({"DATA_DIR": folder, "DATABASE_URL": url, "OMNIROUTE_ADMIN_TOKEN": "bench"})
    client = app.test_client()
    headers = {"Authorization": "Bearer bench"}
    key = client.post("/api/keys", json={"name": "bench"}, headers=headers).json
    timings = []
    started = time.perf_counter()
    for number in range(count):
        body = {"apiKeyId": key["id"], "key": f"api:{number}", "content": sentence(rng)}
        began = time.perf_counter()
        response = client.post("/api/memory", json=body, headers=headers)
        timings.append((time.perf_counter() - began) * 1000)
        assert response.status_code == 201, response.json
    elapsed = time.perf_counter() - started
    print(
        f"API add throughput: {count} POST /api/memory in {elapsed:.1f} s = "
        f"{count / elapsed:,.0f} memories/s (median {statistics.median(timings):.2f} ms)"
    )
    app.extensions["omniroute"].close()


if __name__ == "__main__":
    main()
