"""ObsidianBackend: memories as notes of a vault, through the Obsidian Local REST API plugin.

Each memory is one note, `<folder>/<apiKeyId>/<key>.md`, or for an end user's memory
`<folder>/<apiKeyId>/users/<userId>/<key>.md` (characters a file name cannot hold become
`_`), whose frontmatter holds id, apiKeyId, userId, key, sessionId, type, createdAt,
updatedAt, expiresAt and metadata (each value JSON, which YAML reads as it is), and whose
body is the content. A key's notes live in its own folder and a user's in their own, so no
listing or search of one key ever reaches another's, nor one user's another user's. A
memory's id names its note (`obsidian:<apiKeyId>:<file>`, or `obsidian:<apiKeyId>:<userId>:
<file>`, with no `/`, so it is one segment of an /api/memory/{id} path), so get, update and
delete need no scan. Search asks the plugin's own full-text search (`POST /search/simple/`)
once per topic word of the query, keeps the hits in the key's folder and the request's
user's, and reads the best of them: the vault is never listed whole.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from omniroute.core.clock import now_iso
from omniroute.memory.backends.base import (
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

DEFAULT_URL = "http://localhost:27123"
DEFAULT_FOLDER = "OmniRoute"
SEARCH_WORDS = 4  # the plugin's search runs once per word: a few topic words suffice
_UNSAFE = re.compile(r'[\\/:*?"<>|#^\[\]\x00-\x1f]')
USERS = "users"  # the subfolder of a key's folder that holds a folder per end user


def file_name(text: str) -> str:
    return _UNSAFE.sub("_", text).strip(" .") or "_"


class ObsidianBackend(RemoteBackend, Stateless):
    backend_type = "obsidian"

    def __init__(
        self,
        http: httpx.Client,
        *,
        base_url: str = DEFAULT_URL,
        api_key: str | None = None,
        folder: str = DEFAULT_FOLDER,
        allow_local: bool,
        backend_id: str = "obsidian",
        display_name: str = "Obsidian Vault",
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
        )
        self.folder = folder.strip("/")

    def health(self) -> Health:
        health, status = self._http.check("/")
        if health.ok and (
            not isinstance(status, Mapping) or status.get("authenticated") is not True
        ):
            return Health(False, health.latency_ms, "the vault refused the API key")
        return health

    # -- memories -------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> Memory:
        path = self._path(memory.api_key_id, memory.user_id, memory.key)
        existing = self._read(path)
        now = now_iso()
        note = Memory(
            id=_note_id(memory.api_key_id, memory.user_id, memory.key),
            api_key_id=memory.api_key_id,
            session_id=memory.session_id,
            type=memory.type,
            key=memory.key,
            content=memory.content,
            metadata={**(existing.metadata if existing else {}), **memory.metadata},
            created_at=existing.created_at if existing else now,
            updated_at=now,
            expires_at=memory.expires_at,
            user_id=memory.user_id,
        )
        self._write(note)
        return note

    def get(self, memory_id: str) -> Memory | None:
        path = self._path_of(memory_id)
        return None if path is None else self._read(path)

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        memory = self.get(memory_id)
        if memory is None:
            return False
        fields = {name: value for name, value in changes.items() if name in _CHANGEABLE}
        changed = _replace(memory, fields, now_iso())
        self._write(changed)
        if changed.key != memory.key:
            self._delete(self._path(memory.api_key_id, memory.user_id, memory.key))
        return True

    def delete(self, memory_id: str) -> bool:
        path = self._path_of(memory_id)
        return path is not None and self._delete(path)

    def list(self, query: ListQuery) -> MemoryPage:
        if not query.api_key_id:
            raise NeedsKey("Obsidian lists one key's memories at a time: name apiKeyId.")
        if query.user_id is None:  # the key's shared notes and every user's
            users = [u.removesuffix("/") for u in self._listed(self._users_of(query.api_key_id))
                     if u.endswith("/")]  # fmt: skip
            folders = [self._folder_of(query.api_key_id)]
            folders += [f"{self._users_of(query.api_key_id)}/{user}" for user in users]
        else:
            folders = [self._folder_of(query.api_key_id, query.user_id)]
        paths = sorted(
            f"{folder}/{name}"
            for folder in folders
            for name in self._listed(folder)
            if name.endswith(".md")
        )
        notes = [m for m in (self._read(path) for path in paths) if m]
        wanted = [
            m
            for m in notes
            if (not query.type or m.type == query.type)
            and (not query.session_id or m.session_id == query.session_id)
            and (not query.query or query.query.lower() in f"{m.key} {m.content}".lower())
        ]
        wanted.sort(key=lambda m: m.created_at, reverse=True)
        by_type: dict[str, int] = {}
        for memory in wanted:
            by_type[memory.type] = by_type.get(memory.type, 0) + 1
        page = wanted[query.offset : query.offset + query.limit]
        return MemoryPage(data=page, total=len(wanted), by_type=by_type)

    def search(self, query: SearchQuery) -> list[Memory]:
        key = query.api_key_id
        folders = {self._folder_of(key), self._folder_of(key, query.user_id)}
        scores: dict[str, float] = {}
        for word in topic_words(query.query)[:SEARCH_WORDS]:
            hits = self._http.json(
                "POST", "/search/simple/", params={"query": word, "contextLength": 0}
            )
            for hit in hits or []:
                name = hit.get("filename") if isinstance(hit, Mapping) else None
                if isinstance(name, str) and name.rpartition("/")[0] in folders:
                    scores[name] = scores.get(name, 0.0) + _score(hit)
        best = sorted(scores, key=lambda name: -scores[name])[: max(0, query.limit)]
        return [memory for memory in (self._read(name) for name in best) if memory]

    # -- notes ----------------------------------------------------------------------------

    def _folder_of(self, api_key_id: str, user_id: str = "") -> str:
        """The folder of a key's shared notes, or of one of its end users' notes."""
        if user_id:
            return f"{self._users_of(api_key_id)}/{file_name(user_id)}"
        return f"{self.folder}/{file_name(api_key_id)}"

    def _users_of(self, api_key_id: str) -> str:
        return f"{self.folder}/{file_name(api_key_id)}/{USERS}"

    def _path(self, api_key_id: str, user_id: str, key: str) -> str:
        return f"{self._folder_of(api_key_id, user_id)}/{file_name(key)}.md"

    def _id_at(self, path: str) -> str:
        """The id of the note at `<folder>/<key>/<name>.md` or
        `<folder>/<key>/users/<user>/<name>.md`."""
        parts = path.removeprefix(f"{self.folder}/").removesuffix(".md").split("/")
        if len(parts) == 4 and parts[1] == USERS:
            parts = [parts[0], parts[2], parts[3]]
        return ":".join(["obsidian", *parts])

    def _listed(self, folder: str) -> list[str]:
        """The names in a folder of the vault (a subfolder's ends in `/`); none if absent."""
        try:
            return self._http.json("GET", f"/vault/{quote(folder)}/").get("files", [])
        except NotFound:
            return []

    def _path_of(self, memory_id: str) -> str | None:
        if not memory_id.startswith("obsidian:"):
            return None
        parts = memory_id.removeprefix("obsidian:").split(":")
        if len(parts) not in (2, 3) or not all(parts):
            return None
        *owner, name = parts
        return f"{self._folder_of(*owner)}/{name}.md"

    def _read(self, path: str) -> Memory | None:
        try:
            response = self._http.send(
                "GET", f"/vault/{quote(path)}", headers={"Accept": "text/markdown"}
            )
        except NotFound:
            return None
        memory = _parse(response.text)
        # The id is the note's place, whatever its frontmatter says (a copied or older note).
        return None if memory is None else dataclasses.replace(memory, id=self._id_at(path))

    def _write(self, memory: Memory) -> None:
        self._http.send(
            "PUT",
            f"/vault/{quote(self._path(memory.api_key_id, memory.user_id, memory.key))}",
            content=_render(memory).encode("utf-8"),
            headers={"Content-Type": "text/markdown"},
        )

    def _delete(self, path: str) -> bool:
        try:
            self._http.send("DELETE", f"/vault/{quote(path)}")
        except NotFound:
            return False
        return True


_CHANGEABLE = frozenset({"key", "content", "type", "session_id", "metadata", "expires_at"})


def _note_id(api_key_id: str, user_id: str, key: str) -> str:
    owner = [file_name(api_key_id), *([file_name(user_id)] if user_id else [])]
    return ":".join(["obsidian", *owner, file_name(key)])  # file names hold no ':'


def _render(memory: Memory) -> str:
    values = {
        "id": memory.id, "apiKeyId": memory.api_key_id, "userId": memory.user_id,
        "key": memory.key,
        "sessionId": memory.session_id, "type": memory.type, "createdAt": memory.created_at,
        "updatedAt": memory.updated_at, "expiresAt": memory.expires_at,
        "metadata": memory.metadata,
    }  # fmt: skip
    lines = [f"{name}: {json.dumps(value, ensure_ascii=False)}" for name, value in values.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + memory.content + "\n"


def _parse(text: str) -> Memory | None:
    """A note written by `_render` (or edited by hand, keeping its frontmatter); None for a
    note without our frontmatter."""
    if not text.startswith("---\n") or "\n---\n" not in text[3:]:
        return None
    head, _, body = text[4:].partition("\n---\n")
    values: dict[str, Any] = {}
    for line in head.splitlines():
        name, _, raw = line.partition(":")
        try:
            values[name.strip()] = json.loads(raw.strip())
        except ValueError:
            values[name.strip()] = raw.strip()
    if not all(isinstance(values.get(name), str) for name in ("id", "apiKeyId", "key")):
        return None
    metadata = values.get("metadata")
    return Memory(
        id=values["id"],
        api_key_id=values["apiKeyId"],
        session_id=str(values.get("sessionId") or ""),
        type=str(values.get("type") or "factual"),
        key=values["key"],
        content=body.removesuffix("\n"),
        metadata=metadata if isinstance(metadata, dict) else {},
        created_at=str(values.get("createdAt") or ""),
        updated_at=str(values.get("updatedAt") or ""),
        expires_at=values.get("expiresAt") if isinstance(values.get("expiresAt"), str) else None,
        user_id=str(values.get("userId") or ""),
    )


def _replace(memory: Memory, fields: Mapping[str, Any], now: str) -> Memory:
    values = {**dataclasses.asdict(memory), **fields, "updated_at": now}
    if "key" in fields:
        values["id"] = _note_id(memory.api_key_id, memory.user_id, fields["key"])
    return Memory(**values)


def _score(hit: Mapping[str, Any]) -> float:
    score = hit.get("score")
    return float(score) if isinstance(score, int | float) else 1.0
