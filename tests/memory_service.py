"""A REST memory service on loopback, as GenericMemoryBackend's tests and demos talk to it.

It speaks the generic backend's default protocol (POST/GET /memories, GET/PATCH/DELETE
/memories/{id}, GET /memories/search, GET /health) over an in-memory dict, records every
request (method, path, query, headers, body), and answers `answers[(method, path)]` instead
when a test sets one, e.g. `{("GET", "/health"): (500, "down")}`. A `leaky` service ignores
the key a list or a search names and answers every key's memories (a broken or hostile one).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.loopback import LoopbackServer, QuietHandler, read_body, reply


class MemoryService(LoopbackServer):
    def __init__(self) -> None:
        self.memories: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.answers: dict[tuple[str, str], tuple[int, Any]] = {}
        self.leaky = False
        super().__init__(_handler(self))

    @property
    def last(self) -> dict[str, Any]:
        return self.requests[-1]

    def add(self, **fields: Any) -> dict[str, Any]:
        memory = {
            "id": str(uuid.uuid4()), "apiKeyId": "", "sessionId": "", "type": "factual",
            "metadata": {}, "createdAt": "2026-12-01T00:00:00.000Z",
            "updatedAt": "2026-12-01T00:00:00.000Z", "expiresAt": None, **fields,
        }  # fmt: skip
        self.memories[memory["id"]] = memory
        return memory

    # The default protocol, over the dict.
    def answer(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if (method, path) in self.answers:
            return self.answers[(method, path)]
        if path == "/health":
            return 200, {"ok": True}
        if path == "/memories/search":
            words = query.get("query", "").lower().split()
            found = [
                m for m in self._owned(query)
                if any(w in m["content"].lower() for w in words)
            ]  # fmt: skip
            return 200, found[: int(query.get("limit", 50))]
        if path == "/memories" and method == "POST":
            return 201, self.add(**body)
        if path == "/memories" and method == "GET":
            owned = [
                m for m in self._owned(query)
                if query.get("type", m["type"]) == m["type"]
                and query.get("sessionId", m["sessionId"]) == m["sessionId"]
                and query.get("query", "").lower() in f"{m['key']} {m['content']}".lower()
            ]  # fmt: skip
            start = int(query.get("offset", 0))
            page = owned[start : start + int(query.get("limit", 50))]
            return 200, {"data": page, "total": len(owned)}
        memory_id = path.removeprefix("/memories/")
        memory = self.memories.get(memory_id)
        if memory is None:
            return 404, {"error": "not found"}
        if method == "GET":
            return 200, memory
        if method == "PATCH":
            memory.update(body)
            return 200, memory
        if method == "DELETE":
            del self.memories[memory_id]
            return 204, None
        return 405, "no"

    def _owned(self, query: dict[str, str]) -> list[dict[str, Any]]:
        key = None if self.leaky else query.get("apiKeyId")
        return [m for m in self.memories.values() if key is None or m["apiKeyId"] == key]


def _handler(service: MemoryService) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def _any(self) -> None:
            path, query = self.target()
            raw = read_body(self)
            body = json.loads(raw) if raw else None
            service.requests.append(
                {"method": self.command, "path": path, "query": query,
                 "headers": dict(self.headers), "body": body}
            )  # fmt: skip
            status, payload = service.answer(self.command, path, query, body)
            moved = {"Location": "/moved"} if status in (301, 302, 307, 308) else {}
            reply(self, status, payload, **moved)

        do_GET = do_POST = do_PATCH = do_DELETE = _any

    return Handler
