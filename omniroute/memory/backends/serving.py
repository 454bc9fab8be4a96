"""The one way into memory: the operations the faces need (the proxy's recall, the REST
API, MCP's tools, the studio's list) on the manager as the settings configure it now,
whichever backend is primary (the local store is one of them). A remote backend's errors
come out as BackendError; every answer has passed the manager's tenant filter."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute.memory.backends.base import ListQuery, NewMemory, SearchQuery, visible_to
from omniroute.memory.backends.manager import Found, MemoryManager
from omniroute.memory.backends.setup import BackendSetup
from omniroute.memory.listing import listing_of
from omniroute.memory.model import Memory, MemoryFilter
from omniroute.memory.settings import MemoryConfig
from omniroute.memory.store import MemoryStore


class ServingMemories:
    def __init__(self, setup: BackendSetup, store: MemoryStore) -> None:
        """`store` is the local store: its read cache's counts go with every list."""
        self._setup = setup
        self._store = store

    def _manager(self) -> MemoryManager:
        return self._setup.current()

    def serving_id(self) -> str:
        """The id of the backend that serves now."""
        return self._manager().primary.id

    def listing(self, filters: MemoryFilter, *, limit: int, offset: int) -> dict[str, Any]:
        """A page of memories in the list answer's shape, and `backend`: who served it.

        A remote backend counts its matches (`total`, `byType`); the tokens and the hit
        rate are then of this page alone, as the gateway cannot count what it was not sent.
        """
        manager = self._manager()
        page = manager.page(filters, limit=limit, offset=offset)
        found = listing_of(page, self._store, limit=limit, offset=offset)
        return {**found, "backend": manager.primary.id}

    def get(self, memory_id: str) -> Memory | None:
        """From the primary, or else from each fallback in turn."""
        return self._manager().get(memory_id)

    def get_by_key(self, owner: str, key: str, user_id: str = "") -> Memory | None:
        return self._manager().find_key(owner, key, user_id)

    def create(self, new: NewMemory) -> tuple[Memory, bool]:
        """An upsert on (owner, key); whether it made a new memory."""
        return self._manager().upsert(new)

    def update(self, memory: Memory, changes: Mapping[str, Any]) -> Memory:
        """`memory` with `changes` applied; MemoryNotFound when it is gone."""
        return self._manager().amend(memory, changes)

    def delete(self, memory_id: str) -> bool:
        return self._manager().delete(memory_id)

    def recall(
        self,
        owner: str,
        query: str | None,
        limit: int,
        *,
        max_tokens: int | None = None,
        settings: MemoryConfig | None = None,
        user_id: str = "",
        include_global: bool = False,
        session_id: str | None = None,
    ) -> Found:
        """The owner's memories for `query`, best first, with scores where the backend has
        them (the local store's: the gateway's own retrieval; a fallback's when the primary
        fails); the newest without a query. `settings`: those the caller read (its strategy
        is asked for), so that one request reads them once. An end user's request
        (`user_id`) sees their own memories and the key's shared ones; `include_global`
        adds the global memories; `session_id` keeps that session's and those of none."""
        manager = self._setup.current(settings)
        asked = SearchQuery(
            query=query or "", api_key_id=owner, limit=limit, max_tokens=max_tokens,
            strategy=settings.strategy if settings else None, settings=settings,
            user_id=user_id, include_global=include_global, session_id=session_id,
        )  # fmt: skip
        if query and query.strip():
            return manager.search(asked)
        newest = manager.list(ListQuery(api_key_id=owner, limit=limit)).data
        visible = visible_to(asked, newest, manager.primary.id)
        return Found(visible, manager.primary.id, strategy="recent")

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int:
        """Delete every match (all of them, in batches locally); return how many matched."""
        return self._manager().clear(filters, dry_run=dry_run)
