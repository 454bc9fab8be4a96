"""Keyword search on PostgreSQL: the stored tsvector of each memory, a GIN index, ts_rank.

The tsvector is the `simple` configuration's split of `search_stems` (migrations/postgresql/
0013), the Snowball stems that stemming.py made in the memory's language, as FTS5 indexes
them on SQLite; the query is its stems OR-ed, parsed by the same configuration. Ranked by
ts_rank, chosen on the LoCoMo development split over ts_rank_cd: it found more and took
less time (docs/benchmarks.md).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection

from omniroute.memory.conditions import search_sql_parts
from omniroute.memory.model import Memory


def tsvector_search(
    connection: Connection, stems: list[str], filters: dict[str, Any]
) -> list[tuple[Memory, float]]:
    """(memory, ts_rank) for the owners' live memories with any of `stems`, best first.

    `filters` holds the bind values: owners, now, session, after and limit. The stems are
    word characters only (stemming.py), so OR-ing them cannot make a tsquery syntax error.
    The tsquery is made first and bound as a value: the planner then weighs its lexemes
    against the owners' rows, so a small tenant beside a large one intersects its own rows
    with the GIN index instead of walking the large tenant's matches.
    """
    if not stems:
        return []
    query = connection.exec_driver_sql(
        "SELECT CAST(to_tsquery('simple', %(stems)s) AS text)", {"stems": " | ".join(stems)}
    ).scalar()
    if not query:
        return []
    sql = _tsvector_sql(filters["session"] is not None, filters["after"] is not None)
    rows = connection.exec_driver_sql(sql, {**filters, "query": query}).all()
    return [(Memory.from_values(row), float(row[-1])) for row in rows]


@cache
def _tsvector_sql(by_session: bool, by_age: bool) -> str:
    columns, where = search_sql_parts("postgresql", by_session, by_age)
    return f"""
        SELECT {columns}, ts_rank(m.search_vector, CAST(%(query)s AS tsquery)) AS rank
        FROM memories AS m
        WHERE m.search_vector @@ CAST(%(query)s AS tsquery) AND {where}
        ORDER BY rank DESC, m.seq DESC
        LIMIT %(limit)s
    """
