"""Which memories Qdrant has yet to take (upsert) or drop (delete): the qdrant_outbox table.

The store marks a memory in the transaction that changes it, while Qdrant is enabled; the
sync job serves rows oldest first and deletes each only if it was not marked again meanwhile
(`version`). A failed row stays with its error and is served again by the next run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, and_, delete, func, literal, select, update

from omniroute.core.clock import now_iso
from omniroute.core.db import Database
from omniroute.core.db.tables import memories, qdrant_outbox

UPSERT, DELETE = "upsert", "delete"
MARK_ALL_BATCH = 5000  # memories marked per transaction: a short hold on the write lock


@dataclass(frozen=True)
class Entry:
    memory_id: str
    api_key_id: str
    action: str
    version: int


class QdrantOutbox:
    def __init__(self, database: Database, enabled: Callable[[], bool]) -> None:
        self.db = database
        self._enabled = enabled  # whether writes are mirrored now (the qdrantEnabled setting)

    def mark(self, conn: Connection, items: Iterable[tuple[str, str]], action: str) -> None:
        """Record (memory id, api key id) pairs for Qdrant, in the caller's transaction."""
        rows = [
            {"memory_id": memory_id, "api_key_id": owner, "action": action, "version": 1}
            for memory_id, owner in items
        ]
        if not rows or not self._enabled():
            return
        now = now_iso()
        statement = self.db.insert(qdrant_outbox).values(
            [{**row, "queued_at": now, "attempts": 0} for row in rows]
        )
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=[qdrant_outbox.c.memory_id],
                set_={
                    "action": statement.excluded.action,
                    "version": qdrant_outbox.c.version + 1,
                    "queued_at": statement.excluded.queued_at,
                    "attempts": 0,
                    "last_error": None,
                },
            )
        )

    def mark_all(self, *where) -> int:
        """Mark every memory matching `where` for upsert (a backfill), in short batches."""
        marked, after = 0, 0
        now = now_iso()
        while True:
            with self.db.write() as conn:
                batch = (
                    select(memories.c.seq)
                    .where(memories.c.seq > after, *where)
                    .order_by(memories.c.seq)
                    .limit(MARK_ALL_BATCH)
                    .subquery()
                )
                last = conn.execute(select(func.max(batch.c.seq))).scalar()
                if last is None:
                    return marked
                chosen = select(
                    memories.c.id,
                    memories.c.api_key_id,
                    literal(UPSERT),
                    literal(1),
                    literal(now),
                    literal(0),
                ).where(memories.c.seq > after, memories.c.seq <= last, *where)
                statement = self.db.insert(qdrant_outbox).from_select(
                    ["memory_id", "api_key_id", "action", "version", "queued_at", "attempts"],
                    chosen,
                )
                result = conn.execute(
                    statement.on_conflict_do_update(
                        index_elements=[qdrant_outbox.c.memory_id],
                        set_={
                            "action": UPSERT,
                            "version": qdrant_outbox.c.version + 1,
                            "attempts": 0,
                            "last_error": None,
                        },
                    )
                )
                marked += result.rowcount
                after = last

    def take(self, limit: int, skip: Sequence[str] = ()) -> list[Entry]:
        """The oldest rows, leaving out those already served in this run."""
        query = select(
            qdrant_outbox.c.memory_id,
            qdrant_outbox.c.api_key_id,
            qdrant_outbox.c.action,
            qdrant_outbox.c.version,
        ).order_by(qdrant_outbox.c.queued_at, qdrant_outbox.c.memory_id)
        if skip:
            query = query.where(qdrant_outbox.c.memory_id.not_in(list(skip)))
        with self.db.read() as conn:
            return [Entry(*row) for row in conn.execute(query.limit(limit)).all()]

    def done(self, entries: Sequence[Entry]) -> None:
        """Delete the rows served, unless marked again since they were taken."""
        if not entries:
            return
        with self.db.write() as conn:
            for entry in entries:
                conn.execute(
                    delete(qdrant_outbox).where(
                        and_(
                            qdrant_outbox.c.memory_id == entry.memory_id,
                            qdrant_outbox.c.version == entry.version,
                        )
                    )
                )

    def failed(self, entries: Sequence[Entry], error: str) -> None:
        if not entries:
            return
        with self.db.write() as conn:
            conn.execute(
                update(qdrant_outbox)
                .where(qdrant_outbox.c.memory_id.in_([entry.memory_id for entry in entries]))
                .values(attempts=qdrant_outbox.c.attempts + 1, last_error=error)
            )

    def stats(self) -> dict:
        """Rows waiting, how many of them failed at least once, and the latest error."""
        with self.db.read() as conn:
            pending, failing = conn.execute(
                select(func.count(), func.count().filter(qdrant_outbox.c.attempts > 0))
            ).one()
            last_error = conn.execute(
                select(qdrant_outbox.c.last_error)
                .where(qdrant_outbox.c.last_error.is_not(None))
                .order_by(qdrant_outbox.c.queued_at.desc())
                .limit(1)
            ).scalar()
        return {"pending": pending, "failing": failing, "lastError": last_error}

    def clear(self) -> None:
        """Forget every row (Qdrant turned off: a later enable backfills from scratch)."""
        with self.db.write() as conn:
            conn.execute(delete(qdrant_outbox))
