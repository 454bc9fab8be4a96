"""Portable SQL expressions that each dialect spells its own way (compiled per dialect).

The core builds its queries from these and SQLAlchemy Core, never from dialect-only text.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Integer, bindparam
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement


class folded_position(FunctionElement[int]):  # noqa: N801 (an SQL function, named like one)
    """Where `needle` first occurs in `haystack`, ignoring case in any script (0: nowhere).

    SQLite's LOWER folds only ASCII, so there it is our `omr_casefold` function (Unicode case
    folding, registered on every connection); PostgreSQL's lower() follows the database's
    Unicode locale. `%` and `_` are plain characters either way (no LIKE).
    """

    type = Integer()
    inherit_cache = False

    def __init__(self, haystack: ColumnElement[Any], needle: str) -> None:
        self.needle = needle
        super().__init__(haystack)


@compiles(folded_position, "sqlite")
def _folded_position_sqlite(element: folded_position, compiler: Any, **kw: Any) -> str:
    needle = compiler.process(bindparam(None, element.needle.casefold(), unique=True), **kw)
    return f"instr(omr_casefold({compiler.process(element.clauses, **kw)}), {needle})"


@compiles(folded_position, "postgresql")
def _folded_position_postgresql(element: folded_position, compiler: Any, **kw: Any) -> str:
    needle = compiler.process(bindparam(None, element.needle.lower(), unique=True), **kw)
    return f"strpos(lower({compiler.process(element.clauses, **kw)}), {needle})"
