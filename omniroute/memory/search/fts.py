"""Keyword search: the live memories of some owners (search partitions: a key's, its end users',
the global ones) that share topic words with a query, best first, ranked together.

Both stores search the Snowball stems of each memory (stemming.py: `search_stems`) for the
stems of the query's topic words in every language. On SQLite it is FTS5's MATCH ranked by
bm25 (here); on PostgreSQL a tsvector search ranked by ts_rank (tsvector.py). Both take
the same filters and give higher scores to better matches.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import cache

from cachetools import TTLCache
from sqlalchemy import Connection

from omniroute.memory.conditions import owners_bind, search_sql_parts
from omniroute.memory.model import Memory
from omniroute.memory.search.change_log import SqliteChangeLog
from omniroute.memory.search.query_words import MAX_TOKENS, topic_words
from omniroute.memory.search.stemming import query_stems
from omniroute.memory.search.tsvector import tsvector_search

__all__ = ["MAX_TOKENS", "keyword_search", "match_expression"]

# How many of FTS5's best matches are joined to their rows, per result wanted.
POOL_FACTOR = 4
# A key of at most this many memories is ranked here, from its own matches: FTS5's bm25()
# counts each stem's matches in the whole table first, every key's, so a small key beside a
# large one paid for the large one's matches. Past it, ranking in Python costs more than
# FTS5 saves (a 1,000-memory key: 5.8 ms against FTS5's 1.8; docs/benchmarks.md).
SMALL_KEY = 300
BM25_K1, BM25_B = 1.2, 0.75  # FTS5's own
CHANGES = SqliteChangeLog("memory_changes")
# Partitions' size (memories, stems in all; counted up to SMALL_KEY + 1) by (database, owners),
# with the change log's position it was read at: read again after any write, except that
# partitions found larger are left with FTS5 for the cache's minute.
_sizes: TTLCache[tuple[str, tuple[str, ...]], tuple[int, int, int]] = TTLCache(100_000, 60.0)


# The global partition's token (hex of no id is it: no id holds NUL).
GLOBAL_TOKEN = "00"


def owner_token(owner: str) -> str:
    """The owner (a search partition, model.owner_of) as memories.fts_owner indexes it:
    hex(owner), one exact token; GLOBAL_TOKEN for the global memories (no key)."""
    return owner.encode("utf-8").hex().upper() if owner else GLOBAL_TOKEN


def match_expression(stems: list[str]) -> str | None:
    """Turn a query's stems into a safe FTS5 expression: each quoted, OR-ed together.

    No input can raise an FTS5 syntax error: stems are word characters only (stemming.py),
    and each is a quoted string. Returns None when there is none: then there is nothing to
    search, and nothing is found.
    """
    return " OR ".join(f'"{stem}"' for stem in stems) or None


def keyword_search(
    connection: Connection,
    *,
    owners: Sequence[str],
    query: str,
    now_iso: str,
    session_id: str | None = None,
    created_after: str | None = None,
    limit: int = 100,
) -> list[tuple[Memory, float]]:
    """Return (memory, score) for the owners' live memories matching `query`, best first,
    scored as one ranking (`owners` are search partitions: model.owner_of)."""
    filters = {
        "owners": owners_bind(connection.dialect.name, owners),
        "now": now_iso,
        "session": session_id,
        "after": created_after,
        "limit": limit,
    }
    stems = query_stems(topic_words(query))
    if connection.dialect.name == "postgresql":
        return tsvector_search(connection, stems, filters)
    if not stems:
        return []
    words = match_expression(stems)
    # The owners' tokens are part of the MATCH, so FTS5 intersects with their rows instead
    # of ranking every owner's matches; the exact owner test stays the authority.
    tokens = " OR ".join(f'"{owner_token(owner)}"' for owner in owners)
    expression = f"fts_owner : ({tokens}) AND search_stems : ({words})"
    values = {**filters, "expression": expression, "pool": POOL_FACTOR * limit}
    by_session, by_age = session_id is not None, created_after is not None
    size = _small_size(connection, tuple(owners), values["owners"])
    if size is not None:
        return _ranked_here(connection, values, stems, size, by_session, by_age)
    rows = connection.exec_driver_sql(_fts5_sql(by_session, by_age, True), values).all()
    if len(rows) < limit and _pooled(connection, rows, values) == values["pool"]:
        # The filters left too few of the best `pool`: rank every match instead.
        rows = connection.exec_driver_sql(_fts5_sql(by_session, by_age, False), values).all()
    return [(Memory.from_values(row), -row[-2]) for row in rows]  # bm25: lower is better


def _small_size(
    connection: Connection, owners: tuple[str, ...], bound: str
) -> tuple[int, int] | None:
    """Small partitions' memories and their stems in all, or None when they are larger."""
    known = (connection.engine.url.database or "", owners)
    held = _sizes.get(known)
    if held is None or held[1] <= SMALL_KEY:
        position = CHANGES.position(connection)
        if held is None or held[0] != position:
            count, length = connection.exec_driver_sql(
                "SELECT count(*), total(CASE WHEN search_stems = '' THEN 0 ELSE"
                " length(search_stems) - length(replace(search_stems, ' ', '')) + 1 END)"
                " FROM (SELECT search_stems FROM memories"
                " WHERE owner IN (SELECT value FROM json_each(?)) LIMIT ?)",
                (bound, SMALL_KEY + 1),
            ).one()
            held = _sizes[known] = (position, count, int(length))
    if held[1] > SMALL_KEY:
        return None
    return held[1], held[2]


def _ranked_here(
    connection: Connection,
    values: dict,
    stems: list[str],
    size: tuple[int, int],
    by_session: bool,
    by_age: bool,
) -> list[tuple[Memory, float]]:
    """FTS5's bm25 over the key's own matches: the same formula, with the key's own counts
    (memories, each stem's matches among its live ones, their average length; the owner's
    token counts one, as in FTS5's) instead of the whole table's."""
    rows = connection.exec_driver_sql(_matches_sql(by_session, by_age), values).all()
    count, stems_in_all = size
    average = (stems_in_all + count) / max(count, 1)
    words = [Counter(row[-1].split()) for row in rows]
    found = {stem: sum(1 for held in words if stem in held) for stem in stems}
    weight = {
        stem: max(math.log((count - df + 0.5) / (df + 0.5)), 1e-6) for stem, df in found.items()
    }
    scores = []
    for held in words:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * (sum(held.values()) + 1) / average)
        scores.append(
            sum(
                weight[stem] * held[stem] * (BM25_K1 + 1) / (held[stem] + norm)
                for stem in stems
                if stem in held
            )
        )
    best = sorted(range(len(rows)), key=scores.__getitem__, reverse=True)[: values["limit"]]
    return [(Memory.from_values(rows[n]), scores[n]) for n in best]


def _pooled(connection: Connection, rows: list, values: dict) -> int:
    """How many matches the pooled search ranked (its rows say, unless none was left)."""
    if rows:
        return rows[0][-1]
    return connection.exec_driver_sql(
        "SELECT count(*) FROM (SELECT rowid FROM memory_fts"
        " WHERE memory_fts MATCH :expression LIMIT :pool)",
        values,
    ).scalar_one()


@cache
def _matches_sql(by_session: bool, by_age: bool) -> str:
    """Every live match of a small key, with its stems, unranked (FTS5 counts nothing)."""
    columns, where = search_sql_parts("sqlite", by_session, by_age)
    return f"""
        SELECT {columns}, m.search_stems
        FROM memory_fts CROSS JOIN memories AS m ON m.seq = memory_fts.rowid
        WHERE memory_fts MATCH :expression AND {where}
    """


@cache
def _fts5_sql(by_session: bool, by_age: bool, pooled: bool) -> str:
    """The FTS5 statement, built once per combination of filters.

    Pooled, FTS5 ranks its matches alone and only the best `pool` of them are joined to
    their rows and filtered (a large key's common words match tens of thousands: joining
    each before the sort doubled the search at 100k memories); the last column says how
    many were pooled, so a caller whose filters left too few asks again unpooled. CROSS
    JOIN keeps FTS5 as the outer loop: SQLite would otherwise scan the owner's rows and run
    the MATCH once for each (docs/benchmarks.md has the cost). SQLAlchemy cannot say
    CROSS JOIN or MATERIALIZED, so the statement is text; its row conditions are the core's
    own, compiled once here.
    """
    columns, where = search_sql_parts("sqlite", by_session, by_age)
    if not pooled:
        return f"""
            SELECT {columns}, bm25(memory_fts, 1.0, 0.0) AS rank, 0
            FROM memory_fts CROSS JOIN memories AS m ON m.seq = memory_fts.rowid
            WHERE memory_fts MATCH :expression AND {where}
            ORDER BY rank
            LIMIT :limit
        """
    return f"""
        WITH ranked AS MATERIALIZED (
            SELECT rowid, bm25(memory_fts, 1.0, 0.0) AS rank FROM memory_fts
            WHERE memory_fts MATCH :expression ORDER BY rank LIMIT :pool
        )
        SELECT {columns}, ranked.rank, (SELECT count(*) FROM ranked)
        FROM ranked CROSS JOIN memories AS m ON m.seq = ranked.rowid
        WHERE {where}
        ORDER BY ranked.rank
        LIMIT :limit
    """
