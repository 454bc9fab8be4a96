"""The edge every request passes, whatever the route: nesting, lone surrogates, NUL.

Checked once, before any route reads the body, so that no field of any schema (or the /v1
body, which no schema reads whole) can carry either past it:
- nesting deeper than MAX_DEPTH (Python's parser raises RecursionError, not a value error,
  on 200,000 brackets) is 400;
- a string (or key) with an unpaired UTF-16 surrogate, or a NUL character, is 422 naming
  the field (text_rules.py says why). A chat body (/v1's OpenAI routes) may hold NUL: it
  goes to the provider as sent, and the texts kept for extraction drop it.
- a query parameter with a NUL character is 422 naming the parameter.
A body that is not JSON at all is left to the route, which says so in its own words.
"""

from __future__ import annotations

from flask import Flask, request
from werkzeug.exceptions import BadRequest

from omniroute.core.errors import abort_invalid
from omniroute.core.text_rules import NESTED_TOO_DEEP, first_problem, text_problem

MAX_DEPTH = 200
TOO_DEEP = f"The JSON body is nested more than {MAX_DEPTH} levels deep."
RELAYED = "gateway"  # the /v1 blueprint's bodies go to a provider as sent


def check_request() -> None:
    """before_request: refuse what no route could store (see the module's doc)."""
    for name, value in request.args.items(multi=True):
        if problem := text_problem(value):
            abort_invalid(name, problem)
    if not request.is_json or not request.get_data(cache=True):
        return
    try:
        # Flask keeps what it parsed: /v1, which reads the body with get_json too, does not
        # parse it a second time on the gateway's hot path.
        body = request.get_json(silent=True)
    except RecursionError:
        raise BadRequest(TOO_DEEP) from None
    if body is None:  # not JSON at all: the route says so in its own words
        return
    allow_nul = request.blueprint == RELAYED
    found = first_problem(body, allow_nul=allow_nul, max_depth=MAX_DEPTH)
    if found is None:
        return
    path, problem = found
    if problem == NESTED_TOO_DEEP:
        raise BadRequest(TOO_DEEP)
    abort_invalid(path or "body", problem)


def init_app(app: Flask) -> None:
    app.before_request(check_request)
