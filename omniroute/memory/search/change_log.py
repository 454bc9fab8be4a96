"""Where a process's RAM copy of a key stands in the database's history of changes.

A copy (a large key's keyword index, or its vectors) is read once, then caught up from a log
table of changed memory seqs (`memory_changes`, `vector_changes`), whichever process wrote.
`position` is where a reader starting now stands; `since` gives the seqs changed after a
position and the new position, or None when the log no longer reaches back that far (read
the key again).

SQLite has one writer at a time, so ids are in commit order: a position is the last id read.
On PostgreSQL a long transaction commits its early ids late; each change also records its
transaction, and a position is the oldest transaction still running at the look: every
change of it or a later one is read again next time (applying a change twice is harmless:
the reader reads the memory's current state). A position is saved with a copy on disk (a
vector graph) as `dump` gives it and read back with `load`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Protocol

from sqlalchemy import Connection

# On PostgreSQL the retention sweep prunes changes older than a day; a reader that has not
# looked for half of that reads its key again.
KEPT_SECONDS = 86_400
TRUSTED_SECONDS = KEPT_SECONDS / 2


LOGS = ("memory_changes", "vector_changes")


class ChangeLog(Protocol):
    def position(self, conn: Connection) -> object: ...

    def since(self, conn: Connection, position: object) -> tuple[list[int], object] | None: ...


class SqliteChangeLog:
    """An AUTOINCREMENT log (`vector_changes`, `memory_changes`) pruned to its newest rows."""

    def __init__(self, table: str) -> None:
        self.table = table

    def position(self, conn: Connection) -> int:
        found = conn.exec_driver_sql(
            "SELECT seq FROM sqlite_sequence WHERE name = ?", (self.table,)
        ).scalar()
        return found or 0

    def since(self, conn: Connection, position: object) -> tuple[list[int], int] | None:
        assert isinstance(position, int)
        if self.position(conn) == position:
            return [], position
        changes = conn.exec_driver_sql(
            f"SELECT id, memory_seq FROM {self.table} WHERE id > ? ORDER BY id", (position,)
        ).all()
        if not changes or changes[0][0] != position + 1:
            return None  # pruned past the reader
        return list(dict.fromkeys(seq for _, seq in changes)), changes[-1][0]


@dataclass(frozen=True)
class XidPosition:
    xmin: int  # the oldest transaction running at the look
    at: float  # when (the epoch's seconds: a position saved on disk outlives the process)


class PostgresChangeLog:
    """A log (`memory_changes`, `vector_changes`) with each change's transaction id."""

    def __init__(self, table: str) -> None:
        self.table = table

    def position(self, conn: Connection) -> XidPosition:
        xmin = conn.exec_driver_sql(
            "SELECT CAST(CAST(pg_snapshot_xmin(pg_current_snapshot()) AS text) AS bigint)"
        ).scalar_one()
        return XidPosition(int(xmin), time.time())

    def since(self, conn: Connection, position: object) -> tuple[list[int], XidPosition] | None:
        assert isinstance(position, XidPosition)
        if time.time() - position.at > TRUSTED_SECONDS:
            return None
        now = self.position(conn)
        seqs = conn.exec_driver_sql(
            f"SELECT memory_seq FROM {self.table} WHERE xid >= %(xmin)s ORDER BY id",
            {"xmin": position.xmin},
        ).scalars()
        return list(dict.fromkeys(seqs)), now


def change_log(dialect: str, table: str) -> SqliteChangeLog | PostgresChangeLog:
    """The log `table` on this dialect's database."""
    return PostgresChangeLog(table) if dialect == "postgresql" else SqliteChangeLog(table)


def dump(position: object) -> object:
    """A position as JSON holds it."""
    return asdict(position) if isinstance(position, XidPosition) else position


def load(value: object) -> object:
    """The position `dump` gave."""
    return XidPosition(**value) if isinstance(value, dict) else int(value)


def prune(conn: Connection) -> int:
    """Delete PostgreSQL's changes older than KEPT_SECONDS (the retention sweep)."""
    return sum(
        conn.exec_driver_sql(
            f"DELETE FROM {table} WHERE changed_at < now() - make_interval(secs => %(kept)s)",
            {"kept": KEPT_SECONDS},
        ).rowcount
        for table in LOGS
    )
