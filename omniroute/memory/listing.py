"""Listing memories: the query a list takes, its pages and counts, and reading every match.

The REST API and the studio parse their query strings with the one `ListingQuery` schema
and answer from `listing`, so a filter means the same on both.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import marshmallow as ma
from marshmallow.validate import OneOf, Range
from sqlalchemy import Connection, case, func, select, tuple_

from omniroute.core.db.tables import memories
from omniroute.memory.model import MEMORY_TYPES, SCOPES, Memory, MemoryFilter, MemoryPage
from omniroute.memory.schemas import user_id_field
from omniroute.memory.store import MemoryStore

EXPORT_BATCH = 500
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
# Far past any real list, and small enough that page * limit stays a 64-bit SQL integer.
MAX_PAGE = 1_000_000
MAX_OFFSET = MAX_PAGE * MAX_PAGE_SIZE


class ListingQuery(ma.Schema):
    """The filters and paging of a list of memories, as query parameters."""

    page = ma.fields.Integer(load_default=1, validate=Range(1, MAX_PAGE))
    limit = ma.fields.Integer(load_default=DEFAULT_PAGE_SIZE, validate=Range(1, MAX_PAGE_SIZE))
    offset = ma.fields.Integer(
        validate=Range(0, MAX_OFFSET), metadata={"description": "Wins over page when given."}
    )
    q = ma.fields.String(
        metadata={"description": "Case-insensitive literal substring of content or key."}
    )
    apiKeyId = ma.fields.String(metadata={"description": "Empty means every key."})
    type = ma.fields.String(validate=OneOf(MEMORY_TYPES))
    sessionId = ma.fields.String()
    userId = user_id_field("One end user's memories (of any key unless apiKeyId is given).")
    scope = ma.fields.String(
        validate=OneOf(SCOPES),
        metadata={
            "description": "`global` (no key's), `key` (keys' shared memories) or `user` (end "
            "users' memories); absent: all."
        },
    )


def filters_from(query: Mapping[str, Any]) -> MemoryFilter:
    """The MemoryFilter of a loaded ListingQuery (empty values filter nothing)."""
    return MemoryFilter(
        api_key_id=query.get("apiKeyId") or None,
        type=query.get("type") or None,
        session_id=query.get("sessionId"),
        user_id=query.get("userId") or None,
        scope=query.get("scope") or None,
        text=query.get("q") or None,
    )


def list_page(
    store: MemoryStore,
    filters: MemoryFilter,
    *,
    limit: int = 50,
    offset: int = 0,
    connection: Connection | None = None,
) -> MemoryPage:
    """One page of live memories, newest first, with counts over all matches."""
    with store.joined(connection, store.db.read) as conn:
        data = store.find(filters, limit=limit, offset=offset, connection=conn)
        stats = conn.execute(
            select(
                memories.c.type,
                func.count(),
                func.sum((func.length(memories.c.content) + 3) // 4),
                func.sum(case((memories.c.access_count > 0, 1), else_=0)),
            )
            .where(*store.live_conditions(filters))
            .group_by(memories.c.type)
        ).all()
    return MemoryPage(
        data=data,
        total=sum(row[1] for row in stats),
        by_type={row[0]: row[1] for row in stats},
        tokens_used=sum(row[2] or 0 for row in stats),
        accessed=sum(row[3] or 0 for row in stats),
    )


def listing(store: MemoryStore, filters: MemoryFilter, *, limit: int, offset: int) -> dict:
    """One page of memories with the counts of everything that matches."""
    page = list_page(store, filters, limit=limit, offset=offset)
    return listing_of(page, store, limit=limit, offset=offset)


def listing_of(page: MemoryPage, store: MemoryStore, *, limit: int, offset: int) -> dict:
    """A page in the list answer's shape (the cache counts are `store`'s)."""
    return {
        "data": page.data,
        "total": page.total,
        "page": offset // limit + 1,
        "limit": limit,
        "totalPages": math.ceil(page.total / limit),
        "stats": {
            "total": page.total,
            "byType": page.by_type,
            "tokensUsed": page.tokens_used,
            "hitRate": round(page.accessed / page.total, 4) if page.total else 0.0,
            "cacheStats": {"hits": store.cache_hits, "misses": store.cache_misses},
        },
    }


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


def end_users(store: MemoryStore, api_key_id: str) -> list[dict[str, Any]]:
    """The end users of a key who have live memories: each with how many, and the times of
    the first written and the last changed, most memories first."""
    owned = store.live_conditions(MemoryFilter(api_key_id=api_key_id, scope="user"))
    count = func.count().label("memories")
    query = (
        select(
            memories.c.user_id,
            count,
            func.min(memories.c.created_at).label("first"),
            func.max(memories.c.updated_at).label("last"),
        )
        .where(*owned)
        .group_by(memories.c.user_id)
        .order_by(count.desc(), memories.c.user_id)
    )
    with store.db.read() as conn:
        return [dict(row) for row in conn.execute(query).mappings()]
