"""The retention sweep over 100,000 memories: its time, the longest write-lock hold of a
batch, and what chat traffic feels meanwhile.

N memories of 20 keys (default 100,000), each with a 384-dimension vector in the store's
index (sqlite-vec, or pgvector), all past their expiry but `--live` of them. One sweep
deletes the expired ones, batch by batch (each with its vector, keyword row, history row),
while a writer thread stores a memory every 20 ms the way an extraction job would; the
writer's latency (median, p95, max) is what a chat's write waits. Run with `make bench` or
`python bench/sweep.py --store postgresql`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stores import STORES, database_url, vector_index  # noqa: E402
from omniroute.core.clock import to_iso  # noqa: E402
from omniroute.core.db import (
    Database,  # noqa: E402
    migrate,  # noqa: E402
)
from omniroute.core.db.settings_store import SettingsStore  # noqa: E402
from omniroute.core.db.tables import memories  # noqa: E402
from omniroute.memory.life.decay import DecayPolicy  # noqa: E402
from omniroute.memory.life.sweep import SWEEP_BATCH, RetentionSweep  # noqa: E402
from omniroute.memory.settings import MemorySettings  # noqa: E402
from omniroute.memory.store import MemoryStore  # noqa: E402

DIM = 384
KEYS = 20
SEED_BATCH = 5000


def seed(store: MemoryStore, count: int, live: int) -> None:
    """`count` memories with vectors; all but `live` expired a minute ago."""
    rng = np.random.default_rng(7)
    index = store.vectors
    past = to_iso(store.clock() - timedelta(minutes=1))
    with store.db.write() as conn:
        index.prepare(conn, "bench:random", DIM)
    for start in range(0, count, SEED_BATCH):
        with store.db.write() as conn:
            items = []
            for number in range(start, min(start + SEED_BATCH, count)):
                memory, _ = store.create(
                    api_key_id=f"key-{number % KEYS}",
                    key=f"fact:{number}",
                    content=f"Memory number {number} about tea, Postgres and Berlin.",
                    connection=conn,
                )
                items.append((memory.id, memory.api_key_id))
            seqs = dict(
                conn.execute(
                    memories.select()
                    .with_only_columns(memories.c.id, memories.c.seq)
                    .where(memories.c.id.in_([memory_id for memory_id, _ in items]))
                ).all()
            )
            vectors = rng.standard_normal((len(items), DIM)).astype(np.float32)
            index.upsert(
                conn,
                [(seqs[mid], owner, vec) for (mid, owner), vec in zip(items, vectors, strict=True)],
            )
            conn.execute(
                memories.update()
                .where(memories.c.seq.in_(list(seqs.values())), memories.c.seq > live)
                .values(expires_at=past, needs_reindex=0)
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--live", type=int, default=1000)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--batch", type=int, default=SWEEP_BATCH)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, database_url(args.store, folder) as url:
        database = Database(url)
        migrate.upgrade(database)
        store = MemoryStore(database, vectors=vector_index(database))
        started = time.perf_counter()
        seed(store, args.memories, args.live)
        print(f"{args.store}: {args.memories:,} memories with vectors seeded in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip

        waits: list[float] = []
        done = threading.Event()

        def chat_writes() -> None:
            number = 0
            while not done.is_set():
                began = time.perf_counter()
                store.create(api_key_id="chat", key=f"new:{number}", content="I like green tea.")
                waits.append((time.perf_counter() - began) * 1000)
                number += 1
                done.wait(0.02)

        writer = threading.Thread(target=chat_writes)
        writer.start()
        sweep = RetentionSweep(store, MemorySettings(SettingsStore(database)), DecayPolicy(),
                               batch=args.batch)  # fmt: skip
        began = time.perf_counter()
        report = sweep.run()
        seconds = time.perf_counter() - began
        done.set()
        writer.join()
        with database.read() as conn:
            left = conn.execute(memories.select().with_only_columns(memories.c.seq)).all()
        waits.sort()
        print(
            f"  sweep: {report.expired:,} expired deleted in {seconds:.1f} s "
            f"({report.expired / seconds:,.0f}/s), {report.batches} batches of {args.batch}"
        )
        holds = sorted(report.batch_ms)
        print(
            f"  write-lock hold of a batch: median {report.median_batch_ms:.1f} ms, "
            f"p95 {holds[int(len(holds) * 0.95) - 1]:.1f} ms, longest {holds[-1]:.1f} ms "
            "(target: a few tens of ms)"
        )
        print(
            f"  chat writes meanwhile: {len(waits)}, median {statistics.median(waits):.1f} ms, "
            f"p95 {waits[int(len(waits) * 0.95) - 1]:.1f} ms, max {waits[-1]:.1f} ms"
        )
        print(f"  left: {len(left):,} (live {args.live:,} + {len(waits):,} written meanwhile)")
        assert len(left) == args.live + len(waits), "a live memory was lost"
        database.dispose()


if __name__ == "__main__":
    main()
