"""NotionBackend: memories as pages of a Notion database (the Notion API, version 2022-06-28).

The database needs these properties: `Key` (the title), `Content`, `ApiKeyId`, `SessionId`,
`Metadata` (JSON) and `ExpiresAt` as text, and `Type` as a select; and `UserId` as text for
memories of end users (docs/scopes.md). A memory is a page; its id is the page's id. Every
list and search filters on `ApiKeyId` in Notion's own query, so one key's request never reads
another key's pages, and on `UserId` (the request's user's and the key's shared pages only);
a search asks for pages whose content holds any of the query's topic words. A database
without `UserId` keeps working for the key's shared memories, and refuses a user's memory
(it could not keep it apart) until the property is added. A deleted memory's page is
archived, as Notion deletes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx

from omniroute.memory.backends.base import (
    BackendError,
    Health,
    ListQuery,
    NeedsKey,
    NewMemory,
    SearchQuery,
    Stateless,
)
from omniroute.memory.backends.guarded import NotFound, RemoteBackend
from omniroute.memory.model import Memory, MemoryPage
from omniroute.memory.search.query_words import topic_words

DEFAULT_URL = "https://api.notion.com/v1"
NOTION_VERSION = "2022-06-28"
TEXT_CHUNK = 2000  # Notion's limit for one rich text object
PAGE_SIZE = 100
MAX_LISTED = 1000
SEARCH_WORDS = 4
SCHEMA_SECONDS = 60.0  # how long the database's properties are taken as read
USER = "UserId"
TEXT_PROPERTIES = {
    "content": "Content",
    "api_key_id": "ApiKeyId",
    "session_id": "SessionId",
    "expires_at": "ExpiresAt",
}


class NotionBackend(RemoteBackend, Stateless):
    backend_type = "notion"

    def __init__(
        self,
        http: httpx.Client,
        *,
        database_id: str,
        api_key: str | None,
        allow_local: bool,
        base_url: str = DEFAULT_URL,
        backend_id: str = "notion",
        display_name: str = "Notion",
        timeout_seconds: float = 30.0,
    ) -> None:
        super().__init__(
            backend_id,
            display_name,
            base_url,
            http,
            allow_local=allow_local,
            api_key=api_key,
            timeout_seconds=timeout_seconds,
            headers={"Notion-Version": NOTION_VERSION, "Content-Type": "application/json"},
        )
        self.database_id = database_id
        self._schema: tuple[float, bool] | None = None  # (read at, whether UserId exists)

    def health(self) -> Health:
        return self._http.check(f"/databases/{self.database_id}")[0]

    # -- memories -------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> Memory:
        """An upsert on (apiKeyId, userId, key), as the local store's create is."""
        users = self._has_users()
        if memory.user_id and not users:
            raise BackendError(
                f"{self.display_name}'s database has no UserId property: add one of type "
                "text to keep end users' memories apart"
            )
        properties = {
            "Key": {"title": _text(memory.key)},
            "Type": {"select": {"name": memory.type}},
            "Metadata": {"rich_text": _text(json.dumps(dict(memory.metadata)))},
            **{
                name: {"rich_text": _text(getattr(memory, field) or "")}
                for field, name in TEXT_PROPERTIES.items()
            },
            **({USER: {"rich_text": _text(memory.user_id)}} if users else {}),
        }
        same = [_equals("ApiKeyId", memory.api_key_id), _title_equals(memory.key)]
        existing = self._query({"and": same + _user_is(memory.user_id, users)}, 1)
        if existing:
            page = self._http.json(
                "PATCH", f"/pages/{existing[0]['id']}", json={"properties": properties}
            )
        else:
            body = {"parent": {"database_id": self.database_id}, "properties": properties}
            page = self._http.json("POST", "/pages", json=body)
        return _memory(page)

    def get(self, memory_id: str) -> Memory | None:
        try:
            page = self._http.json("GET", f"/pages/{memory_id}")
        except NotFound:
            return None
        return None if page.get("archived") else _memory(page)

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        properties: dict[str, Any] = {}
        for field, value in changes.items():
            if field == "key":
                properties["Key"] = {"title": _text(value)}
            elif field == "type":
                properties["Type"] = {"select": {"name": value}}
            elif field == "metadata":
                properties["Metadata"] = {"rich_text": _text(json.dumps(dict(value)))}
            elif field in TEXT_PROPERTIES:
                properties[TEXT_PROPERTIES[field]] = {"rich_text": _text(value or "")}
        try:
            self._http.json("PATCH", f"/pages/{memory_id}", json={"properties": properties})
        except NotFound:
            return False
        return True

    def delete(self, memory_id: str) -> bool:
        try:
            self._http.json("PATCH", f"/pages/{memory_id}", json={"archived": True})
        except NotFound:
            return False
        return True

    def list(self, query: ListQuery) -> MemoryPage:
        if not query.api_key_id:
            raise NeedsKey("Notion lists one key's memories at a time: name apiKeyId.")
        conditions = [_equals("ApiKeyId", query.api_key_id)]
        if query.user_id is not None:
            conditions += _user_is(query.user_id, self._has_users())
        if query.type:
            conditions.append({"property": "Type", "select": {"equals": query.type}})
        if query.session_id:
            conditions.append(_equals("SessionId", query.session_id))
        if query.query:
            conditions.append({"property": "Content", "rich_text": {"contains": query.query}})
        pages = self._query({"and": conditions}, MAX_LISTED)
        memories = [_memory(page) for page in pages]
        by_type: dict[str, int] = {}
        for memory in memories:
            by_type[memory.type] = by_type.get(memory.type, 0) + 1
        window = memories[query.offset : query.offset + query.limit]
        return MemoryPage(data=window, total=len(memories), by_type=by_type)

    def search(self, query: SearchQuery) -> list[Memory]:
        words = topic_words(query.query)[:SEARCH_WORDS]
        if not words:
            return []
        any_word = [{"property": "Content", "rich_text": {"contains": w}} for w in words]
        owned = [_equals("ApiKeyId", query.api_key_id), {"or": any_word}]
        if self._has_users():  # the key's shared pages and the request's user's
            mine = [_user_is("", True)[0], *_user_is(query.user_id, True)]
            owned.append({"or": mine} if query.user_id else mine[0])
        owned = {"and": owned}
        memories = [_memory(page) for page in self._query(owned, PAGE_SIZE)]
        hits = {m.id: sum(w.lower() in m.content.lower() for w in words) for m in memories}
        memories.sort(key=lambda m: -hits[m.id])
        return memories[: max(0, query.limit)]

    def _has_users(self) -> bool:
        """Whether the database has the UserId property (read again after a minute: an
        admin may add it)."""
        now = time.monotonic()
        if self._schema is None or now - self._schema[0] > SCHEMA_SECONDS:
            database = self._http.json("GET", f"/databases/{self.database_id}")
            self._schema = (now, USER in (database.get("properties") or {}))
        return self._schema[1]

    def _query(self, condition: dict[str, Any], most: int) -> list[dict[str, Any]]:
        """Pages of the database matching `condition`, newest first, up to `most`."""
        pages: list[dict[str, Any]] = []
        body: dict[str, Any] = {
            "filter": condition,
            "sorts": [{"timestamp": "created_time", "direction": "descending"}],
            "page_size": min(PAGE_SIZE, most),
        }
        while len(pages) < most:
            answer = self._http.json("POST", f"/databases/{self.database_id}/query", json=body)
            pages += [p for p in answer.get("results", []) if not p.get("archived")]
            if not answer.get("has_more") or not answer.get("next_cursor"):
                break
            body["start_cursor"] = answer["next_cursor"]
        return pages[:most]


def _text(value: str) -> list[dict[str, Any]]:
    """Rich text objects for `value`, split at Notion's length limit."""
    chunks = [value[i : i + TEXT_CHUNK] for i in range(0, len(value), TEXT_CHUNK)] or [""]
    return [{"type": "text", "text": {"content": chunk}} for chunk in chunks if chunk] or []


def _plain(value: Mapping[str, Any], kind: str) -> str:
    return "".join(part.get("plain_text") or part.get("text", {}).get("content", "")
                   for part in value.get(kind) or [])  # fmt: skip


def _equals(name: str, value: str) -> dict[str, Any]:
    return {"property": name, "rich_text": {"equals": value}}


def _user_is(user_id: str, users: bool) -> list[dict[str, Any]]:
    """The condition that a page is this end user's ('' the key's shared); none when the
    database has no UserId (it then holds shared pages only)."""
    if not users:
        return []
    if user_id:
        return [_equals(USER, user_id)]
    return [{"property": USER, "rich_text": {"is_empty": True}}]


def _title_equals(value: str) -> dict[str, Any]:
    return {"property": "Key", "title": {"equals": value}}


def _memory(page: Mapping[str, Any]) -> Memory:
    props = page.get("properties") or {}
    try:
        metadata = json.loads(_plain(props.get("Metadata", {}), "rich_text") or "{}")
    except ValueError:
        metadata = {}
    text = {
        field: _plain(props.get(name, {}), "rich_text") for field, name in TEXT_PROPERTIES.items()
    }
    kind = (props.get("Type") or {}).get("select") or {}
    return Memory(
        id=page["id"],
        api_key_id=text["api_key_id"],
        session_id=text["session_id"],
        type=kind.get("name") or "factual",
        key=_plain(props.get("Key", {}), "title"),
        content=text["content"],
        metadata=metadata if isinstance(metadata, dict) else {},
        created_at=str(page.get("created_time") or ""),
        updated_at=str(page.get("last_edited_time") or ""),
        expires_at=text["expires_at"] or None,
        user_id=_plain(props.get(USER, {}), "rich_text"),
    )
