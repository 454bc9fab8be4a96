"""The Obsidian Local REST API plugin on loopback, as ObsidianBackend's tests speak to it.

A vault in a dict (path -> markdown), behind the plugin's routes: GET / (status, and whether
the bearer key is right), GET /vault/<dir>/ (the files and folders in one folder),
GET/PUT/DELETE /vault/<path> (a note's text), POST /search/simple/?query= (notes holding the
query, case-insensitive, scored by count). Every other route needs the key (401). Requests are
recorded, so a test can say which routes were used.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

API_KEY = "vault-key-5678"


class ObsidianVault:
    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ObsidianVault:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, method: str, path: str, query: dict, body: bytes, authorised: bool):
        if path == "/" and method == "GET":
            return 200, {"status": "OK", "service": "Obsidian Local REST API",
                         "authenticated": authorised}  # fmt: skip
        if not authorised:
            return 401, {"errorCode": 40101, "message": "Authorization required."}
        if path == "/search/simple/" and method == "POST":
            word = query.get("query", "").lower()
            hits = [
                {"filename": name, "score": text.lower().count(word), "matches": []}
                for name, text in self.notes.items()
                if word and word in text.lower()
            ]
            return 200, hits
        if not path.startswith("/vault/"):
            return 404, {"errorCode": 40400, "message": "Not found"}
        target = unquote(path.removeprefix("/vault/"))
        if method == "GET" and (target == "" or target.endswith("/")):
            inside = {
                name[len(target):].split("/")[0] + ("/" if "/" in name[len(target):] else "")
                for name in self.notes if name.startswith(target)
            }  # fmt: skip
            return (200, {"files": sorted(inside)}) if inside else (404, {"errorCode": 40400})
        if method == "GET":
            return (
                (200, self.notes[target]) if target in self.notes else (404, {"errorCode": 40400})
            )
        if method == "PUT":
            self.notes[target] = body.decode("utf-8")
            return 204, None
        if method == "DELETE":
            return (204, None) if self.notes.pop(target, None) is not None else (404, {})
        return 405, {}


def _handler(vault: ObsidianVault) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _any(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            authorised = self.headers.get("Authorization") == f"Bearer {API_KEY}"
            vault.requests.append({"method": self.command, "path": parts.path, "query": query})
            status, payload = vault.answer(self.command, parts.path, query, body, authorised)
            if isinstance(payload, str):
                data, kind = payload.encode("utf-8"), "text/markdown"
            else:
                data, kind = (
                    (b"" if payload is None else json.dumps(payload).encode()),
                    "application/json",
                )
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = _any

    return Handler
