"""Erasing one key's data, or one end user's inside it, for a person who asks to be forgotten.

Everything of the key (or of the end user) goes: its memories with their vectors and keyword
index rows (the store deletes those with each memory, in batches), their Qdrant points
(queued in the same transactions, removed by the sync job), its audit history, and the chat
texts still waiting for extraction. The caller revokes the key first, so that no new
request writes meanwhile (an end user's chats may go on: what they write afterwards is new).
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

PART = 500  # memory ids bound in one statement


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


def erase_owner(store: MemoryStore, api_key_id: str, user_id: str | None = None) -> Erased:
    """Delete every row of one key, or of one end user of it when `user_id` is given (the
    key's shared memories and its other users' stay); return how many of each kind."""
    outbox = [extraction_outbox.c.api_key_id == api_key_id]
    owned = MemoryFilter(api_key_id=api_key_id, user_id=user_id)
    if user_id is not None:
        outbox.append(extraction_outbox.c.user_id == user_id)
    with store.db.write() as conn:
        waiting = conn.execute(delete(extraction_outbox).where(*outbox)).rowcount
        vectors = conn.execute(
            select(func.count()).where(*matching(owned), memories.c.needs_reindex == 0)
        ).scalar_one()
        ids = list(conn.execute(select(memories.c.id).where(*matching(owned))).scalars())
    queued = [qdrant_outbox.c.api_key_id == api_key_id, qdrant_outbox.c.action == "delete"]
    points = 0

    def count_points(conn, doomed) -> None:
        """The Qdrant deletes the batch queued, counted in its transaction: once committed,
        the sync job may take them at once."""
        nonlocal points
        part = [memory.id for memory in doomed]
        points += conn.execute(
            select(func.count()).where(*queued, qdrant_outbox.c.memory_id.in_(part))
        ).scalar_one()

    deleted = delete_where(store, matching(owned), reason="erased", in_batch=count_points)
    with store.db.write() as conn:
        if user_id is None:
            gone = memory_history.c.api_key_id == api_key_id
            history = conn.execute(delete(memory_history).where(gone)).rowcount
        else:  # an end user's: by their memories' ids
            history = 0
            for start in range(0, len(ids), PART):
                part = ids[start : start + PART]
                history += conn.execute(
                    delete(memory_history).where(memory_history.c.memory_id.in_(part))
                ).rowcount
    store.db.scrub()
    return Erased(deleted, vectors, history, waiting, points)
