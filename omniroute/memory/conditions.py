"""Which rows count: the one "live memory" condition, and a filter's conditions beside it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, or_

from ..tables import memories
from .model import MemoryFilter


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
        needle = filters.text.casefold()
        conditions.append(
            or_(
                func.instr(func.omr_casefold(memories.c.content), needle) > 0,
                func.instr(func.omr_casefold(memories.c.key), needle) > 0,
            )
        )
    return conditions
