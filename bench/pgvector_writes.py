"""What pgvector's HNSW index costs a write: N random vectors stored in batches of 1,024 with
the index and without it (pgserver's PostgreSQL 16, pgvector 0.6.2, or BENCH_POSTGRES_URL).

The service keeps no HNSW index in PostgreSQL (pgvector.py): large keys are searched from
each process's RAM copies. Run with `python bench/pgvector_writes.py [N]` (default 20,000).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sqlalchemy import insert, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stores import database_url  # noqa: E402
from omniroute.core.db import Database, migrate  # noqa: E402
from omniroute.core.db.tables import memories  # noqa: E402
from omniroute.memory.search.pgvector import TABLE, PgVectorIndex  # noqa: E402

DIM, BATCH = 256, 1024


def store_all(database: Database, index: PgVectorIndex, vectors: np.ndarray) -> float:
    """Seconds to upsert every vector, a transaction a batch."""
    started = time.perf_counter()
    for start in range(0, len(vectors), BATCH):
        with database.write() as conn:
            part = range(start, min(len(vectors), start + BATCH))
            index.upsert(conn, [(seq + 1, "big", vectors[seq]) for seq in part])
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("count", nargs="?", type=int, default=20_000)
    count = parser.parse_args().count
    vectors = np.random.default_rng(1).normal(size=(count, DIM)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder, database_url("postgresql", folder) as url:
        database = Database(url)
        migrate.upgrade(database)
        index = PgVectorIndex()
        now = "2026-01-01T00:00:00.000Z"
        with database.write() as conn:
            conn.execute(
                insert(memories),
                [{"seq": n + 1, "id": f"m{n}", "api_key_id": "big", "type": "factual",
                  "key": f"k{n}", "content": "x", "created_at": now, "updated_at": now}
                 for n in range(count)],
            )  # fmt: skip
            index.prepare(conn, "bench:random:256", DIM)
        plain = store_all(database, index, vectors)
        with database.write() as conn:
            conn.execute(text(f"TRUNCATE {TABLE}"))
            conn.execute(
                text(f"CREATE INDEX hnsw ON {TABLE} USING hnsw (embedding vector_cosine_ops)")
            )
        with_hnsw = store_all(database, index, vectors)
        print(f"{count:,} vectors of {DIM} dimensions stored in batches of {BATCH:,}")
        print(f"  without an HNSW index {plain:8.1f} s")
        print(f"  with pgvector's HNSW  {with_hnsw:8.1f} s ({with_hnsw / plain:.0f}x)")
        database.dispose()


if __name__ == "__main__":
    main()
