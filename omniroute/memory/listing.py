"""Reading every live memory that matches a filter: for export, counts and progress."""

from __future__ import annotations

from collections.abc import Iterator

from sqlalchemy import func, select, tuple_

from ..tables import memories
from .model import Memory, MemoryFilter
from .store import MemoryStore

EXPORT_BATCH = 500


def iter_live(store: MemoryStore, filters: MemoryFilter) -> Iterator[Memory]:
    """Yield the live memories matching `filters`, newest first, in short read transactions.

    Paging is by (created_at, seq), not by offset: memories written during the export are
    newer than the cursor and cannot push a row into the next batch twice.
    """
    cursor: tuple[str, int] | None = None
    while True:
        query = select(memories).where(*store.live_conditions(filters))
        if cursor is not None:
            query = query.where(tuple_(memories.c.created_at, memories.c.seq) < cursor)
        query = query.order_by(memories.c.created_at.desc(), memories.c.seq.desc())
        with store.db.read() as conn:
            rows = conn.execute(query.limit(EXPORT_BATCH)).mappings().all()
        for row in rows:
            yield Memory.from_row(row)
        if len(rows) < EXPORT_BATCH:
            return
        cursor = (rows[-1]["created_at"], rows[-1]["seq"])


def count_live(store: MemoryStore, filters: MemoryFilter | None = None) -> int:
    with store.db.read() as conn:
        query = select(func.count()).where(*store.live_conditions(filters or MemoryFilter()))
        return conn.execute(query).scalar_one()
