"""The audit trail of memories: one memory_history row for each create, update and delete.

Rows are written in the transaction of the write they record, and outlive the memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, insert, select

from omniroute.core.db.tables import memory_history
from omniroute.memory.model import Memory

# The fields whose change is a change a person would call one (not access counts).
COMPARED = ("type", "key", "content", "metadata", "session_id", "expires_at")


# Why the life cycle removed or rewrote a memory (a person's own delete or edit has none).
REASONS = ("expired", "retention", "decay", "summarized", "compacted", "cleared", "erased")


def record(
    conn: Connection,
    action: str,
    old: Memory | None,
    new: Memory | None,
    now: str,
    reason: str | None = None,
) -> None:
    """Record a create (no `old`), an update, or a delete (no `new`), and why (`REASONS`)."""
    conn.execute(insert(memory_history), _row(action, old, new, now, reason))


def record_creates(conn: Connection, created: Sequence[Memory], now: str) -> None:
    """Record the creation of many memories in one statement."""
    if created:
        conn.execute(
            insert(memory_history), [_row("create", None, new, now, None) for new in created]
        )


def record_deletes(
    conn: Connection, deleted: Sequence[Memory], now: str, reason: str | None = None
) -> None:
    """Record the deletion of many memories in one statement."""
    if deleted:
        conn.execute(
            insert(memory_history), [_row("delete", old, None, now, reason) for old in deleted]
        )


def _row(
    action: str, old: Memory | None, new: Memory | None, now: str, reason: str | None
) -> dict[str, Any]:
    subject = new or old
    assert subject is not None
    if reason is not None and reason not in REASONS:
        raise ValueError(f"unknown history reason {reason!r}")
    return {
        "memory_id": subject.id,
        "api_key_id": subject.api_key_id,
        "action": action,
        "old_type": old.type if old else None,
        "new_type": new.type if new else None,
        "old_key": old.key if old else None,
        "new_key": new.key if new else None,
        "old_content": old.content if old else None,
        "new_content": new.content if new else None,
        "created_at": now,
        "reason": reason,
    }


def differs(old: Memory, new: Memory) -> bool:
    """Whether an update changed anything a person would call a change."""
    return any(getattr(old, name) != getattr(new, name) for name in COMPARED)


def entries(conn: Connection, memory_id: str) -> list[dict[str, Any]]:
    """The audit rows of one memory, oldest first."""
    rows = conn.execute(
        select(memory_history)
        .where(memory_history.c.memory_id == memory_id)
        .order_by(memory_history.c.seq)
    ).mappings()
    return [dict(row) for row in rows]
