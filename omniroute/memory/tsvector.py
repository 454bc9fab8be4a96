"""Keyword search on PostgreSQL: the stored tsvector of each memory, a GIN index, ts_rank_cd.

Each memory is indexed with its own language's configuration (migrations/postgresql/0001:
english, dutch or german, else simple), so its words are Snowball-stemmed. A query's
language is not known, so its topic words are stemmed by every configuration and the
lexemes OR-ed (as websearch_to_tsquery's `or` would, without its syntax): "editors" then
finds an English "editor", "Katzen" a German "Katze". Diacritics are folded on both sides
(omr_fold), so "munchen" finds "München".
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql

from ..tables import memories
from .conditions import search_conditions
from .model import MEMORY_COLUMNS, Memory

CONFIGURATIONS = ("english", "dutch", "german", "simple")


# Every configuration's lexemes of the words, each once (a tsvector keeps distinct lexemes),
# OR-ed: a third the terms of OR-ing each configuration's whole tsquery, and ts_rank_cd's
# work grows with them.
_STEMS = " || ".join(f"to_tsvector('{name}', omr_fold(%(words)s))" for name in CONFIGURATIONS)
QUERY_SQL = (
    "SELECT string_agg(quote_literal(lexeme), ' | ')"
    f" FROM unnest(tsvector_to_array({_STEMS})) AS lexeme"
)


def tsvector_search(
    connection: Connection, words: list[str], filters: dict[str, Any]
) -> list[tuple[Memory, float]]:
    """(memory, ts_rank_cd) for the owner's live memories with any of `words`, best first.

    `filters` holds the bind values: owner, now, session, after and limit. The words are
    parsed as text (to_tsvector), never as query syntax, so no query raises a syntax error.
    The tsquery is made first and bound as a value: the planner then weighs its lexemes
    against the owner's rows, so a small tenant beside a large one intersects its own rows
    with the GIN index instead of walking the large tenant's matches.
    """
    if not words:
        return []
    query = connection.exec_driver_sql(QUERY_SQL, {"words": " ".join(words)}).scalar()
    if query is None:  # every word a stop word in every configuration
        return []
    sql = _tsvector_sql(filters["session"] is not None, filters["after"] is not None)
    rows = connection.exec_driver_sql(sql, {**filters, "query": query}).all()
    return [(Memory.from_values(row), float(row[-1])) for row in rows]


@cache
def _tsvector_sql(by_session: bool, by_age: bool) -> str:
    m = memories.alias("m")
    where = search_conditions(m, by_session, by_age).compile(
        dialect=postgresql.dialect(paramstyle="pyformat")
    )
    columns = ", ".join(f"m.{name}" for name in MEMORY_COLUMNS)
    return f"""
        SELECT {columns}, ts_rank_cd(m.search_vector, CAST(%(query)s AS tsquery)) AS rank
        FROM memories AS m
        WHERE m.search_vector @@ CAST(%(query)s AS tsquery) AND {where}
        ORDER BY rank DESC, m.seq DESC
        LIMIT %(limit)s
    """
