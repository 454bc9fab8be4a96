"""A threaded HTTP server on 127.0.0.1 for the fake services the tests talk to (the
upstream provider, Qdrant, memory backends)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # a hundred clients connect at once in the serving tests


class LoopbackServer:
    """Serves `handler` (a BaseHTTPRequestHandler class made for this instance) on a free
    port; `url` is its root. `stop` returns within a hundredth of a second (the serving
    loop's poll), not half of one: nearly every test stops one."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing, with the request's path and query at hand."""

    def log_message(self, *args: Any) -> None:
        pass

    def target(self) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.path)
        return parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def reply(handler: BaseHTTPRequestHandler, status: int, payload: Any, **headers: str) -> None:
    """Answer with `payload`: JSON, markdown text for a str, nothing for None."""
    if isinstance(payload, str):
        data, kind = payload.encode("utf-8"), "text/markdown"
    else:
        data = b"" if payload is None else json.dumps(payload).encode()
        kind = "application/json"
    handler.send_response(status)
    for name, value in headers.items():
        handler.send_header(name, value)
    handler.send_header("Content-Type", kind)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
