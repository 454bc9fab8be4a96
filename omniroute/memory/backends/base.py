"""The interface every memory backend implements, and the values it speaks in.

A backend stores memories of many keys; every call names the key it acts for (a create
carries `api_key_id`, a list or search filters by it). What a backend answers passes
`owned_by`, the one tenant filter, before any face sees it or deletes by it, so no backend
can hand one key's memories to another key's request; a search's answer passes `visible_to`
too, which keeps an end user's request to their own memories, the key's and the global
ones (docs/scopes.md).

A kind implements the seven calls (create, get, update, delete, list, search, health);
`Derived` gives it the rest from those (an upsert on the key, a page with counts, a recall,
a clear). The local store implements every call natively, with the same meaning.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.core.metrics import FOREIGN_MEMORIES
from omniroute.memory.model import Memory, MemoryFilter, MemoryPage, scope_of
from omniroute.memory.settings import MemoryConfig
from omniroute.memory.store import MemoryNotFound

log = logging.getLogger(__name__)
# How many memories a derived clear lists at a time.
CLEAR_PAGE = 100


class BackendError(Exception):
    """A backend answered with an error or could not be reached; the message says which."""


class BackendUnavailable(BackendError):
    """A backend's health check failed, so it was not asked at all."""


class NeedsKey(BackendError):
    """The backend lists one key's memories at a time, and the list named none."""


@dataclass(frozen=True)
class Health:
    ok: bool
    latency_ms: float
    message: str | None = None


def elapsed_ms(started: float) -> float:
    """Milliseconds since `started` (a time.perf_counter() value), for Health."""
    return round((time.perf_counter() - started) * 1000, 2)


@dataclass(frozen=True)
class NewMemory:
    api_key_id: str
    key: str
    content: str
    type: str = "factual"
    session_id: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    expires_at: str | None = None
    user_id: str = ""

    def fields(self) -> dict[str, Any]:
        """Its fields as the local store's `create` takes them."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ListQuery:
    api_key_id: str | None = None
    type: str | None = None
    session_id: str | None = None
    query: str | None = None
    limit: int = 50
    offset: int = 0
    order_by: str | None = None
    order_dir: str | None = None
    user_id: str | None = None  # one end user's ('' the key's shared ones); None: all


@dataclass(frozen=True)
class SearchQuery:
    query: str
    api_key_id: str
    # The end user the request is for ('' for none), whether global memories are wanted,
    # and the session it is limited to (with memories of none; None: every session).
    user_id: str = ""
    include_global: bool = False
    session_id: str | None = None
    limit: int = 20
    max_tokens: int | None = None
    strategy: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    # The settings the request already read, for a backend that ranks with them (the local
    # store): read once per chat, not again by each part it passes through.
    settings: MemoryConfig | None = None


@dataclass(frozen=True)
class Recalled:
    """A backend's memories for a query, best first: their scores where it has them, and
    how it ranked them (`strategy`, the local retriever's, or `backend:<id>`); a ranking
    that fell back (say, from vectors to keywords) says why."""

    memories: list[Memory]
    strategy: str
    scores: Mapping[str, float] = field(default_factory=dict)
    fallback_reason: str | None = None


def owned_by(owner: str | None, memories: list[Memory], backend_id: str) -> list[Memory]:
    """The memories of `owner` (all of them when no owner was named); the rest are dropped,
    counted in FOREIGN_MEMORIES and logged: the tenant filter every answer passes."""
    if owner is None:
        return memories
    kept = [memory for memory in memories if memory.api_key_id == owner]
    if len(kept) < len(memories):
        FOREIGN_MEMORIES.labels(backend_id).inc(len(memories) - len(kept))
        log.warning(
            "backend %s answered %d memories of other keys; dropped",
            backend_id, len(memories) - len(kept),
        )  # fmt: skip
    return kept


def visible_to(query: SearchQuery, memories: list[Memory], backend_id: str) -> list[Memory]:
    """What a search may answer: the key's memories (its user's own and its shared ones),
    the global ones when asked, of the session and of none when one is named."""
    kept = [
        memory
        for memory in memories
        if (memory.api_key_id == query.api_key_id and memory.user_id in ("", query.user_id))
        or (query.include_global and memory.api_key_id == "")
    ]
    if query.session_id is not None:
        kept = [memory for memory in kept if memory.session_id in ("", query.session_id)]
    if len(kept) < len(memories):
        FOREIGN_MEMORIES.labels(backend_id).inc(len(memories) - len(kept))
    return kept


def in_filter(filters: MemoryFilter, memory: Memory) -> bool:
    """Whether a listed memory is of the filter's end user, scope and creation window:
    checked here too, as a remote list takes none of them (a service that ignores `userId`
    must never have another user's memories cleared)."""
    return (
        (filters.user_id is None or memory.user_id == filters.user_id)
        and (filters.scope is None or scope_of(memory.api_key_id, memory.user_id) == filters.scope)
        and (filters.created_after is None or memory.created_at >= filters.created_after)
        and (filters.created_before is None or memory.created_at < filters.created_before)
    )


class MemoryBackend(Protocol):
    id: str
    display_name: str
    backend_type: str  # what it is (`local`, `obsidian`, `notion`, a generic's backendType)

    def create(self, memory: NewMemory) -> Memory: ...

    def get(self, memory_id: str) -> Memory | None: ...

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool: ...

    def delete(self, memory_id: str) -> bool: ...

    def list(self, query: ListQuery) -> MemoryPage: ...

    def search(self, query: SearchQuery) -> list[Memory]: ...

    def health(self) -> Health: ...

    def find_key(self, api_key_id: str, key: str, user_id: str = "") -> Memory | None: ...

    def upsert(self, memory: NewMemory) -> tuple[Memory, bool]: ...

    def amend(self, memory: Memory, changes: Mapping[str, Any]) -> Memory: ...

    def page(self, filters: MemoryFilter, *, limit: int, offset: int) -> MemoryPage: ...

    def recall(self, query: SearchQuery) -> Recalled: ...

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int: ...

    def initialize(self) -> None: ...

    def shutdown(self) -> None: ...


def named(backend: MemoryBackend) -> str:
    """A backend as logs name it: its id and what it is."""
    return f"{backend.id} ({backend.backend_type})"


class Stateless:
    """initialize and shutdown for a backend that holds nothing between calls."""

    def initialize(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


class Derived:
    """The calls a backend kind gets from its seven: what a remote service offers no
    endpoint for, done with its list, create, update and delete."""

    id: str

    def find_key(self, api_key_id: str, key: str, user_id: str = "") -> Memory | None:
        """The owner's (its end user's, if named) memory with this key (a list query: the
        seven have no lookup by key)."""
        page = self.list(ListQuery(api_key_id=api_key_id, query=key, limit=100, user_id=user_id))
        mine = owned_by(api_key_id, page.data, self.id)
        return next((m for m in mine if m.key == key and m.user_id == user_id), None)

    def upsert(self, memory: NewMemory) -> tuple[Memory, bool]:
        """Create, or update the owner's memory of the same key (whether it was created), as
        the local store's create does: a service that would add a twin never gets one."""
        existing = self.find_key(memory.api_key_id, memory.key, memory.user_id)
        if existing is None:
            return self.create(memory), True
        changes = {
            "content": memory.content,
            "type": memory.type,
            "session_id": memory.session_id,
            "metadata": {**existing.metadata, **memory.metadata},
            "expires_at": memory.expires_at,
        }
        self.update(existing.id, changes)
        return self.get(existing.id) or existing, False

    def amend(self, memory: Memory, changes: Mapping[str, Any]) -> Memory:
        """`memory` with `changes` applied, read back (by its key first: a service may name
        a memory by its key); MemoryNotFound when it is not there."""
        if not self.update(memory.id, changes):
            raise MemoryNotFound(f"Memory {memory.id} not found.")
        key = changes.get("key", memory.key)
        changed = self.find_key(memory.api_key_id, key, memory.user_id) or self.get(memory.id)
        if changed is None:
            raise MemoryNotFound(f"Memory {memory.id} not found.")
        return changed

    def page(self, filters: MemoryFilter, *, limit: int, offset: int) -> MemoryPage:
        """A page with the service's own `total` and `byType`; the tokens and the injected
        count are of this page alone (the gateway cannot count what it was not sent)."""
        page = self.list(
            ListQuery(api_key_id=filters.api_key_id, type=filters.type,
                      session_id=filters.session_id, query=filters.text,
                      limit=limit, offset=offset, user_id=filters.user_id)
        )  # fmt: skip
        data = [memory for memory in page.data if in_filter(filters, memory)]
        return dataclasses.replace(
            page,
            data=data,
            tokens_used=sum((len(m.content) + 3) // 4 for m in data),
            accessed=sum(1 for m in data if m.access_count > 0),
        )

    def recall(self, query: SearchQuery) -> Recalled:
        """The service's search for the key, then for the global memories when asked (a
        second search: the service keeps them under no key); `visible_to` keeps what the
        request may see."""
        found = self.search(query)
        if query.include_global and query.api_key_id:
            seen = {memory.id for memory in found}
            shared = self.search(dataclasses.replace(query, api_key_id="", user_id=""))
            found += [memory for memory in shared if memory.id not in seen]
        return Recalled(visible_to(query, found, self.id), f"backend:{self.id}")

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int:
        """Delete the owner's matches one by one (all of them: paging goes on past a page
        the tenant filter emptied); return how many matched."""
        doomed, offset = [], 0
        while True:
            page = self.list(
                ListQuery(api_key_id=filters.api_key_id, type=filters.type,
                          session_id=filters.session_id, limit=CLEAR_PAGE, offset=offset,
                          user_id=filters.user_id)
            )  # fmt: skip
            doomed += [
                m for m in owned_by(filters.api_key_id, page.data, self.id)
                if in_filter(filters, m)
            ]  # fmt: skip
            offset += CLEAR_PAGE
            if not page.data or offset >= page.total:
                break
        if not dry_run:
            for memory in doomed:
                self.delete(memory.id)
        return len(doomed)
