"""Erasing one key's data, for a user who asks to be forgotten.

Everything of the key goes: its memories with their vectors and keyword index rows (the
store deletes those with each memory, in batches), their Qdrant points (queued in the same
transactions, removed by the sync job), its audit history, and the chat texts still waiting
for extraction. The caller revokes the key first, so that no new request writes meanwhile.
Then the database is scrubbed (`Database.scrub`): on SQLite nothing of the text is left in
the file or its write-ahead log; on PostgreSQL VACUUM runs (see its docstring for what that
leaves until `flask memory scrub --full`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, select

from omniroute.core.db.tables import extraction_outbox, memories, memory_history, qdrant_outbox
from omniroute.memory.conditions import matching
from omniroute.memory.life.bulk import delete_where
from omniroute.memory.model import MemoryFilter
from omniroute.memory.store import MemoryStore


@dataclass(frozen=True)
class Erased:
    memories: int
    vectors: int
    history: int
    extraction_outbox: int
    qdrant_points: int  # points queued for deletion (removed by the sync job)

    def as_dict(self) -> dict[str, int]:
        return {
            "memories": self.memories,
            "vectors": self.vectors,
            "history": self.history,
            "extractionOutbox": self.extraction_outbox,
            "qdrantPoints": self.qdrant_points,
        }


def erase_owner(store: MemoryStore, api_key_id: str) -> Erased:
    """Delete every row of one key; return how many of each kind."""
    with store.db.write() as conn:
        waiting = conn.execute(
            delete(extraction_outbox).where(extraction_outbox.c.api_key_id == api_key_id)
        ).rowcount
        vectors = conn.execute(
            select(func.count()).where(
                memories.c.api_key_id == api_key_id, memories.c.needs_reindex == 0
            )
        ).scalar_one()
    deleted = delete_where(store, matching(MemoryFilter(api_key_id=api_key_id)), reason="erased")
    with store.db.write() as conn:
        history = conn.execute(
            delete(memory_history).where(memory_history.c.api_key_id == api_key_id)
        ).rowcount
        queued = conn.execute(
            select(func.count()).where(
                qdrant_outbox.c.api_key_id == api_key_id, qdrant_outbox.c.action == "delete"
            )
        ).scalar_one()
    store.db.scrub()
    return Erased(deleted, vectors, history, waiting, queued)
