"""How a Flask view hands a chat's answer to the web process's event loop.

The web process serves Flask on a few threads (a2wsgi), which are far too few to wait out
hundreds of provider streams. So a chat's view does the short work on its thread (the key,
the memories, the body to forward) and leaves the `relay` (the prepared provider call) in the
request's Handoff; the ASGI front that put the Handoff into the request (proxy/front.py) then
calls the provider and relays its answer on the event loop, and no thread or database
connection waits for the provider. Under a plain WSGI server there is no Handoff, and the
view relays the answer itself.

Request logging (observe.py) cannot log such a request when Flask is done with it: it leaves
`report`, which the front calls with the status it finally sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SCOPE_KEY = "omniroute.core.handoff"


@dataclass
class Handoff:
    relay: Any = None  # proxy.relay.PreparedChat, set by the view
    report: Callable[[int], None] | None = None  # logs and counts the request, by its status


def handoff_of(environ: dict[str, Any]) -> Handoff | None:
    """The request's Handoff, when an ASGI front serves it (a2wsgi puts the scope there)."""
    scope = environ.get("asgi.scope")
    return scope.get(SCOPE_KEY) if isinstance(scope, dict) else None
