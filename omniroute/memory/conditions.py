"""Which rows count: the one "live memory" condition, and a filter's conditions beside it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, literal_column, or_, text
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
    if filters.user_id is not None:
        conditions.append(memories.c.user_id == filters.user_id)
    if filters.scope is not None:
        conditions += SCOPE_CONDITIONS[filters.scope]()
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


SCOPE_CONDITIONS = {
    "global": lambda: [memories.c.api_key_id == ""],
    "key": lambda: [memories.c.api_key_id != "", memories.c.user_id == ""],
    "user": lambda: [memories.c.user_id != ""],
}


def search_conditions(
    rows: Any, by_session: bool, by_age: bool, owner: ColumnElement[bool] | None = None
) -> ColumnElement[bool]:
    """A search's conditions on live `rows` (an alias of memories) of its partitions
    (model.owner_of), bound as the list `owners` (or the condition `owner` given), with bind
    parameters `now` and, when used, `session` and `after`. A session's search sees its own
    memories and those of no session."""
    if owner is None:
        owner = rows.c.owner.in_(bindparam("owners", expanding=True))
    conditions = [owner, not_expired(rows.c.expires_at, bindparam("now"))]
    if by_session:
        session = rows.c.session_id
        conditions.append(or_(session == bindparam("session"), session == literal_column("''")))
    if by_age:
        conditions.append(rows.c.created_at >= bindparam("after"))
    return and_(*conditions)


def search_sql_parts(dialect: str, by_session: bool, by_age: bool) -> tuple[str, str]:
    """For a search written as text over `memories AS m`: a Memory's columns, and the search's
    conditions compiled for the dialect (named binds on SQLite, pyformat on PostgreSQL; the
    owners bound as owners_bind makes them)."""
    m = memories.alias("m")
    compiler = (
        postgresql.dialect(paramstyle="pyformat")
        if dialect == "postgresql"
        else sqlite.dialect(paramstyle="named")
    )
    # Text binds no list: SQLite takes the owners as a JSON array, PostgreSQL as an array.
    owner = text(
        "m.owner = ANY(:owners)"
        if dialect == "postgresql"
        else "m.owner IN (SELECT value FROM json_each(:owners))"
    )
    where = search_conditions(m, by_session, by_age, owner).compile(dialect=compiler)
    return ", ".join(f"m.{name}" for name in MEMORY_COLUMNS), str(where)


def owners_bind(dialect: str, owners: Sequence[str]) -> Any:
    """The `owners` of a text search (search_sql_parts) as its dialect binds them."""
    return list(owners) if dialect == "postgresql" else json.dumps(list(owners))
