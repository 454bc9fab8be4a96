"""The edge every JSON body passes, whatever the route: nesting and lone surrogates.

Checked once, before any route reads the body, so that no field of any schema (or the /v1
body, which no schema reads whole) can carry either past it:
- nesting deeper than MAX_DEPTH (Python's parser raises RecursionError, not a value error,
  on 200,000 brackets) is 400;
- a string with an unpaired UTF-16 surrogate ("\\ud800" is valid JSON, but no UTF-8 text:
  SQLite, the templates and every upstream fail on it) is 422 naming the field.
A body that is not JSON at all is left to the route, which says so in its own words.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, request
from werkzeug.exceptions import BadRequest

from .errors import abort_invalid

MAX_DEPTH = 200


TOO_DEEP = f"The JSON body is nested more than {MAX_DEPTH} levels deep."
LONE_SURROGATE = "Contains an unpaired surrogate (\\ud800-\\udfff): not valid text."


def check_json_body() -> None:
    """before_request: refuse a JSON body nested too deeply or holding a lone surrogate."""
    if not request.is_json:
        return
    if not request.get_data(cache=True):
        return
    try:
        # Flask keeps what it parsed: /v1, which reads the body with get_json too, does not
        # parse it a second time on the gateway's hot path.
        body = request.get_json(silent=True)
    except RecursionError:
        raise BadRequest(TOO_DEEP) from None
    if body is None:  # not JSON at all: the route says so in its own words
        return
    problem = find_problem(body)
    if problem == TOO_DEEP:
        raise BadRequest(TOO_DEEP)
    if problem is not None:
        abort_invalid(problem, LONE_SURROGATE)


def find_problem(value: Any) -> str | None:
    """TOO_DEEP, or the path of the first string (or key) with a lone surrogate, or None.

    Walks without recursion, so no depth of nesting can overflow the stack here.
    """
    stack: list[tuple[Any, str, int]] = [(value, "body", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return TOO_DEEP
        if isinstance(item, str):
            if _has_lone_surrogate(item):
                return path
        elif isinstance(item, dict):
            for key, child in item.items():
                if _has_lone_surrogate(key):
                    return path
                stack.append((child, _join(path, key), depth + 1))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((child, _join(path, index), depth + 1))
    return None


def _join(path: str, name: object) -> str:
    return str(name) if path == "body" else f"{path}.{name}"


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def init_app(app: Flask) -> None:
    app.before_request(check_json_body)
