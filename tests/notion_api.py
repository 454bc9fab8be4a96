"""The Notion API on loopback, as NotionBackend's tests speak to it: one database in a dict,
GET /databases/<id> (its properties: `UserId` only while `users` is true, as in a database
made before end users), POST /databases/<id>/query (filters: and, or, rich_text equals,
contains and is_empty, title equals, select equals; page_size and start_cursor), POST /pages,
GET and PATCH /pages/<id> (properties, archived). Every request needs the bearer key and the
Notion-Version header, as the real API does. Requests are recorded."""

from __future__ import annotations

import json
import uuid
from typing import Any

from tests.loopback import LoopbackServer, QuietHandler, read_body, reply

API_KEY = "secret_notion_9012"
DATABASE = "db-memories"


def plain(value: dict[str, Any], kind: str) -> str:
    return "".join(part["text"]["content"] for part in value.get(kind, []))


def matches(page: dict[str, Any], condition: dict[str, Any]) -> bool:
    if "and" in condition:
        return all(matches(page, c) for c in condition["and"])
    if "or" in condition:
        return any(matches(page, c) for c in condition["or"])
    value = page["properties"].get(condition["property"], {})
    for kind in ("rich_text", "title"):
        if kind in condition:
            text, test = plain(value, kind), condition[kind]
            if "equals" in test:
                return text == test["equals"]
            if "is_empty" in test:
                return text == ""
            return test["contains"].lower() in text.lower()
    return (value.get("select") or {}).get("name") == condition["select"]["equals"]


class NotionApi(LoopbackServer):
    def __init__(self) -> None:
        self.pages: dict[str, dict[str, Any]] = {}
        self.requests: list[dict[str, Any]] = []
        self.users = True
        self._clock = 0
        super().__init__(_handler(self))

    @property
    def url(self) -> str:
        return f"{super().url}/v1"

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if path == f"/v1/databases/{DATABASE}" and method == "GET":
            names = ["Key", "Content", "ApiKeyId", "SessionId", "Metadata", "ExpiresAt", "Type"]
            names += ["UserId"] if self.users else []
            return 200, {"object": "database", "id": DATABASE,
                         "properties": {name: {"name": name} for name in names}}  # fmt: skip
        if path == f"/v1/databases/{DATABASE}/query" and method == "POST":
            found = [p for p in self.pages.values() if matches(p, body.get("filter", {}))]
            found.sort(key=lambda p: p["created_time"], reverse=True)
            start = int(body.get("start_cursor") or 0)
            size = body.get("page_size", 100)
            window = found[start : start + size]
            more = start + size < len(found)
            return 200, {"object": "list", "results": window, "has_more": more,
                         "next_cursor": str(start + size) if more else None}  # fmt: skip
        if method in ("POST", "PATCH") and not self.users and "UserId" in json.dumps(body):
            return 400, {"object": "error", "code": "validation_error",
                         "message": "UserId is not a property that exists."}  # fmt: skip
        if path == "/v1/pages" and method == "POST":
            self._clock += 1
            stamp = f"2026-12-01T00:00:{self._clock:02d}.000Z"
            page = {"object": "page", "id": str(uuid.uuid4()), "archived": False,
                    "created_time": stamp, "last_edited_time": stamp,
                    "parent": body["parent"], "properties": body["properties"]}  # fmt: skip
            self.pages[page["id"]] = page
            return 200, page
        if path.startswith("/v1/pages/"):
            page = self.pages.get(path.removeprefix("/v1/pages/"))
            if page is None:
                return 404, {"object": "error", "status": 404, "code": "object_not_found"}
            if method == "PATCH":
                page["properties"].update(body.get("properties", {}))
                page["archived"] = body.get("archived", page["archived"])
            return 200, page
        return 404, {"object": "error", "code": "invalid_request_url"}


def _handler(api: NotionApi) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def _any(self) -> None:
            raw = read_body(self)
            body = json.loads(raw) if raw else None
            api.requests.append({"method": self.command, "path": self.path, "body": body})
            if self.headers.get("Authorization") != f"Bearer {API_KEY}":
                status, payload = 401, {"object": "error", "code": "unauthorized"}
            elif self.headers.get("Notion-Version") != "2022-06-28":
                status, payload = 400, {"object": "error", "code": "missing_version"}
            else:
                status, payload = api.answer(self.command, self.path, body)
            reply(self, status, payload)

        do_GET = do_POST = do_PATCH = _any

    return Handler
