"""The Obsidian Local REST API plugin on loopback, as ObsidianBackend's tests speak to it.

A vault in a dict (path -> markdown), behind the plugin's routes: GET / (status, and whether
the bearer key is right), GET /vault/<dir>/ (the files and folders in one folder),
GET/PUT/DELETE /vault/<path> (a note's text), POST /search/simple/?query= (notes holding the
query, case-insensitive, scored by count). Every other route needs the key (401). Requests are
recorded, so a test can say which routes were used.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from tests.loopback import LoopbackServer, QuietHandler, read_body, reply

API_KEY = "vault-key-5678"


class ObsidianVault(LoopbackServer):
    def __init__(self) -> None:
        self.notes: dict[str, str] = {}
        self.requests: list[dict[str, Any]] = []
        super().__init__(_handler(self))

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


def _handler(vault: ObsidianVault) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def _any(self) -> None:
            path, query = self.target()
            body = read_body(self)
            authorised = self.headers.get("Authorization") == f"Bearer {API_KEY}"
            vault.requests.append({"method": self.command, "path": path, "query": query})
            reply(self, *vault.answer(self.command, path, query, body, authorised))

        do_GET = do_PUT = do_POST = do_DELETE = _any

    return Handler
