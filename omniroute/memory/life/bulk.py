"""Deleting many memories: in batches, each its own short transaction, each deletion whole.

One code path for every bulk deletion: the REST API's DELETE /api/memory, `flask memory
clear`, the MCP clear tool, the retention sweep, summarisation's originals and erasing a key.
A batch deletes its memories through the store (their vectors, keyword rows, history rows
with the reason, Qdrant marks) in one transaction, so a deletion is never half done; other
writers wait at most one batch for the write lock, and get a turn between batches.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Connection, func, select

from omniroute.core.db.tables import memories
from omniroute.memory.conditions import matching
from omniroute.memory.model import Memory, MemoryFilter
from omniroute.memory.store import MemoryStore

# A batch holds the write lock briefly, even in a large key (docs/benchmarks.md).
DELETE_BATCH = 50
MAX_PAUSE_SECONDS = 0.05


def delete_where(
    store: MemoryStore,
    conditions: Iterable[Any] | Callable[[str], Iterable[Any]],
    *,
    reason: str,
    batch: int = DELETE_BATCH,
    on_batch: Callable[[int, float], None] | None = None,
    in_batch: Callable[[Connection, list[Memory]], None] | None = None,
) -> int:
    """Delete every memory that meets the SQL `conditions`; return how many.

    `conditions` may be a function of each batch's time (an expiry cutoff moves). They run
    in SQL, so they hold whatever the count and order. `on_batch` hears each batch's count
    and how long its transaction held the write lock; `in_batch` is called inside each
    batch's transaction with what it deleted (to read what the deletes wrote before any
    other process can act on it).
    """
    deleted = 0
    while True:
        now = store.now()
        where = conditions(now) if callable(conditions) else conditions
        with store.db.write() as conn:
            started = time.perf_counter()  # the write lock is held from here to commit
            rows = conn.execute(
                select(memories).where(*where).order_by(memories.c.seq).limit(batch)
            ).mappings()
            doomed = [Memory.from_row(row) for row in rows]
            store.delete_rows(conn, doomed, now, reason)
            if in_batch is not None:
                in_batch(conn, doomed)
        held = time.perf_counter() - started
        if on_batch is not None:
            on_batch(len(doomed), held)
        deleted += len(doomed)
        if len(doomed) < batch:
            if deleted:
                store.notify_write()
            return deleted
        # Let the writers that queued behind this batch in before the next (SQLite's busy
        # handler polls; a batch begun at once would keep winning): at most half the time
        # is the sweep's.
        time.sleep(min(held, MAX_PAUSE_SECONDS))


def clear(
    store: MemoryStore,
    filters: MemoryFilter,
    *,
    dry_run: bool = False,
    reason: str = "cleared",
    batch: int = DELETE_BATCH,
) -> int:
    """Delete every memory that matches `filters`, or (dry run) count them; return how many.

    Clearing means the text is gone, so memories past their expiry (never served, still
    stored) count and go as well.
    """
    if dry_run:
        with store.db.read() as conn:
            return conn.execute(
                select(func.count()).select_from(memories).where(*matching(filters))
            ).scalar_one()
    return delete_where(store, matching(filters), reason=reason, batch=batch)
