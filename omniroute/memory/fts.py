"""Keyword search: one owner's live memories that share topic words with a query, best first.

Both stores search the Snowball stems of each memory (stemming.py: `search_stems`) for the
stems of the query's topic words in every language. On SQLite it is FTS5's MATCH ranked by
bm25 (here); on PostgreSQL a tsvector search ranked by ts_rank_cd (tsvector.py). Both take
the same filters and give higher scores to better matches.
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import Connection
from sqlalchemy.dialects import sqlite

from ..tables import memories
from .conditions import search_conditions
from .model import MEMORY_COLUMNS, Memory
from .query_words import MAX_TOKENS, topic_words
from .stemming import query_stems
from .tsvector import tsvector_search

__all__ = ["MAX_TOKENS", "keyword_search", "match_expression"]


def owner_token(api_key_id: str) -> str:
    """The owner as memories.fts_owner indexes it: hex(api_key_id), one exact token."""
    return api_key_id.encode("utf-8").hex().upper()


def match_expression(query: str) -> str | None:
    """Turn free text into a safe FTS5 expression: its topic words' stems, quoted, OR-ed.

    No input can raise an FTS5 syntax error: only word characters survive, and each stem
    is a quoted string. Returns None when no word is left: then there is nothing to search,
    and nothing is found.
    """
    return " OR ".join(f'"{stem}"' for stem in query_stems(topic_words(query))) or None


def keyword_search(
    connection: Connection,
    *,
    api_key_id: str,
    query: str,
    now_iso: str,
    session_id: str | None = None,
    created_after: str | None = None,
    limit: int = 100,
) -> list[tuple[Memory, float]]:
    """Return (memory, score) for one owner's live memories matching `query`, best first."""
    filters = {
        "owner": api_key_id,
        "now": now_iso,
        "session": session_id,
        "after": created_after,
        "limit": limit,
    }
    if connection.dialect.name == "postgresql":
        return tsvector_search(connection, query_stems(topic_words(query)), filters)
    words = match_expression(query)
    if words is None:
        return []
    # The owner's token is part of the MATCH, so FTS5 intersects with the owner's rows
    # instead of ranking every owner's matches; the exact api_key_id test stays the authority.
    expression = f'fts_owner : "{owner_token(api_key_id)}" AND search_stems : ({words})'
    sql = _fts5_sql(session_id is not None, created_after is not None)
    rows = connection.exec_driver_sql(sql, {**filters, "expression": expression}).all()
    return [(Memory.from_values(row), -row[-1]) for row in rows]  # bm25: lower is better


@cache
def _fts5_sql(by_session: bool, by_age: bool) -> str:
    """The FTS5 statement, built once per combination of filters.

    CROSS JOIN keeps FTS5 as the outer loop: SQLite would otherwise scan the owner's rows and
    run the MATCH once for each (670 ms instead of 5 ms at 10k memories). SQLAlchemy cannot
    say CROSS JOIN, so the statement is text; its row conditions are the core's own,
    compiled once here.
    """
    m = memories.alias("m")
    where = search_conditions(m, by_session, by_age).compile(
        dialect=sqlite.dialect(paramstyle="named")
    )
    columns = ", ".join(f"m.{name}" for name in MEMORY_COLUMNS)
    return f"""
        SELECT {columns}, bm25(memory_fts, 1.0, 0.0) AS rank
        FROM memory_fts CROSS JOIN memories AS m ON m.seq = memory_fts.rowid
        WHERE memory_fts MATCH :expression AND {where}
        ORDER BY rank
        LIMIT :limit
    """
