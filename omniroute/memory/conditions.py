"""Which rows count: the one "live memory" condition, and a filter's conditions beside it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, or_
from sqlalchemy.dialects import postgresql, sqlite

from omniroute.core.db.sql import folded_position
from omniroute.core.db.tables import memories
from omniroute.memory.model import MEMORY_COLUMNS, MemoryFilter


def not_expired(expires_at: Any, now: Any) -> ColumnElement[bool]:
    """A memory is live until its expiry (none means never); `now` is ISO text or a bind."""
    return or_(expires_at.is_(None), expires_at > now)


def live_matching(filters: MemoryFilter, now: str) -> list[ColumnElement[bool]]:
    """Conditions on `memories` for the live memories that match `filters`."""
    return [not_expired(memories.c.expires_at, now), *matching(filters)]


def matching(filters: MemoryFilter) -> list[ColumnElement[bool]]:
    """Conditions on `memories` for every memory that matches `filters`, expired or not."""
    conditions: list[ColumnElement[bool]] = []
    if filters.api_key_id is not None:
        conditions.append(memories.c.api_key_id == filters.api_key_id)
    if filters.type is not None:
        conditions.append(memories.c.type == filters.type)
    if filters.session_id is not None:
        conditions.append(memories.c.session_id == filters.session_id)
    if filters.created_after is not None:
        conditions.append(memories.c.created_at >= filters.created_after)
    if filters.created_before is not None:
        conditions.append(memories.c.created_at < filters.created_before)
    if filters.text:
        conditions.append(
            or_(
                folded_position(memories.c.content, filters.text) > 0,
                folded_position(memories.c.key, filters.text) > 0,
            )
        )
    return conditions


def search_conditions(rows: Any, by_session: bool, by_age: bool) -> ColumnElement[bool]:
    """A keyword search's conditions on one owner's live `rows` (an alias of memories), with
    bind parameters `owner`, `now` and, when used, `session` and `after`."""
    conditions = [
        rows.c.api_key_id == bindparam("owner"),
        not_expired(rows.c.expires_at, bindparam("now")),
    ]
    if by_session:
        conditions.append(rows.c.session_id == bindparam("session"))
    if by_age:
        conditions.append(rows.c.created_at >= bindparam("after"))
    return and_(*conditions)


def search_sql_parts(dialect: str, by_session: bool, by_age: bool) -> tuple[str, str]:
    """For a search written as text over `memories AS m`: a Memory's columns, and the search's
    conditions compiled for the dialect (named binds on SQLite, pyformat on PostgreSQL)."""
    m = memories.alias("m")
    compiler = (
        postgresql.dialect(paramstyle="pyformat")
        if dialect == "postgresql"
        else sqlite.dialect(paramstyle="named")
    )
    where = search_conditions(m, by_session, by_age).compile(dialect=compiler)
    return ", ".join(f"m.{name}" for name in MEMORY_COLUMNS), str(where)
