"""What a string must not hold to be stored or sent on: a lone surrogate, a NUL character;
and a number that is no JSON number.

"\\ud800" is valid JSON but no UTF-8 text (SQLite, PostgreSQL, the templates and every
upstream fail on it); PostgreSQL's text cannot hold U+0000 at all, and no memory needs it.
The JSON edge refuses both in any body, the store in what it writes, MCP in its arguments.
A number too large for a double (`1e999999`) parses as infinity, and `NaN` or `Infinity` as
themselves: none can be written back as JSON (a provider request, stored metadata), so they
are refused as well.
"""

from __future__ import annotations

import math
from typing import Any

LONE_SURROGATE = "Contains an unpaired surrogate (\\ud800-\\udfff): not valid text."
NUL = "Contains a NUL character (\\u0000): not text a database can store."
NOT_FINITE = "A number out of range (or NaN/Infinity): not a JSON number."


class UnstorableText(ValueError):
    """A field holds text that cannot be stored; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def text_problem(text: str, *, allow_nul: bool = False) -> str | None:
    """Why `text` cannot be stored, or None."""
    if "\x00" in text and not allow_nul:
        return NUL
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return LONE_SURROGATE
    return None


# first_problem's answer for a value nested deeper than its max_depth.
NESTED_TOO_DEEP = "Nested too deeply."


def first_problem(
    value: Any, *, path: str = "", allow_nul: bool = False, max_depth: int | None = None
) -> tuple[str, str] | None:
    """(path, problem) of the first string, key or number in `value` that cannot be stored,
    or None.

    Paths are dotted from `path` ("" is the value itself): `metadata.note`, `messages.0`.
    Walks without recursion, so no depth of nesting can overflow the stack; past
    `max_depth` levels the answer is (path, NESTED_TOO_DEEP).
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    while stack:
        item, where, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            return where, NESTED_TOO_DEEP
        if isinstance(item, str):
            if problem := text_problem(item, allow_nul=allow_nul):
                return where, problem
        elif isinstance(item, dict):
            for key, child in item.items():
                if problem := text_problem(str(key), allow_nul=allow_nul):
                    return where, problem
                stack.append((child, _join(where, key), depth + 1))
        elif isinstance(item, list):
            stack.extend((child, _join(where, n), depth + 1) for n, child in enumerate(item))
        elif isinstance(item, float) and not math.isfinite(item):
            return where, NOT_FINITE
    return None


def _join(path: str, name: object) -> str:
    return f"{path}.{name}" if path else str(name)


def check_fields(**fields: Any) -> None:
    """Raise UnstorableText for the first field (or nested value) that cannot be stored."""
    for name, value in fields.items():
        if found := first_problem(value, path=name):
            raise UnstorableText(*found)
