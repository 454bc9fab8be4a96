"""The memory operations the faces need (the REST API, the studio's list, MCP's tools), on
whichever backend serves: the local store's own paths while it is primary (unchanged), the
manager's otherwise. A remote backend's errors come out as BackendError."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from omniroute.memory.backends.base import ListQuery, NewMemory, SearchQuery
from omniroute.memory.backends.local import LOCAL_ID
from omniroute.memory.backends.manager import MemoryManager
from omniroute.memory.backends.setup import BackendSetup
from omniroute.memory.life import bulk
from omniroute.memory.listing import listing, listing_of
from omniroute.memory.model import Memory, MemoryFilter, MemoryPage
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryNotFound, MemoryStore

PAGE = 100


class ServingMemories:
    def __init__(
        self,
        setup: BackendSetup,
        store: MemoryStore,
        retriever: Retriever,
        settings: MemorySettings,
    ) -> None:
        self._setup = setup
        self._store = store
        self._retriever = retriever
        self._settings = settings

    def _remote(self) -> MemoryManager | None:
        return self._setup.remote_primary()

    def serving_id(self) -> str:
        """The id of the backend that serves now."""
        remote = self._remote()
        return LOCAL_ID if remote is None else remote.primary.id

    def listing(self, filters: MemoryFilter, *, limit: int, offset: int) -> dict[str, Any]:
        """A page of memories in the list answer's shape, and `backend`: who served it.

        A remote backend counts its matches (`total`, `byType`); the tokens and the hit
        rate are then of this page alone, as the gateway cannot count what it was not sent.
        """
        remote = self._remote()
        if remote is None:
            found = listing(self._store, filters, limit=limit, offset=offset)
            return {**found, "backend": LOCAL_ID}
        page = remote.list(
            ListQuery(api_key_id=filters.api_key_id, type=filters.type,
                      session_id=filters.session_id, query=filters.text,
                      limit=limit, offset=offset)
        )  # fmt: skip
        page = _counted(page)
        found = listing_of(page, self._store, limit=limit, offset=offset)
        return {**found, "backend": remote.primary.id}

    def get(self, memory_id: str) -> Memory | None:
        remote = self._remote()
        return self._store.get(memory_id) if remote is None else remote.get(memory_id)

    def get_by_key(self, owner: str, key: str) -> Memory | None:
        remote = self._remote()
        if remote is None:
            return self._store.get_by_key(owner, key)
        return remote.find_key(owner, key)

    def create(self, new: NewMemory) -> tuple[Memory, bool]:
        """An upsert on (owner, key); whether it made a new memory."""
        remote = self._remote()
        if remote is None:
            return self._store.create(**new.fields())
        return remote.upsert(new)

    def update(self, memory: Memory, changes: Mapping[str, Any]) -> Memory:
        """`memory` with `changes` applied; MemoryNotFound when it is gone."""
        remote = self._remote()
        if remote is None:
            return self._store.update(memory.id, **changes)
        if not remote.update(memory.id, changes):
            raise MemoryNotFound(f"Memory {memory.id} not found.")
        key = changes.get("key", memory.key)
        changed = self.get_by_key(memory.api_key_id, key) or remote.get(memory.id)
        if changed is None:
            raise MemoryNotFound(f"Memory {memory.id} not found.")
        return changed

    def delete(self, memory_id: str) -> bool:
        remote = self._remote()
        return self._store.delete(memory_id) if remote is None else remote.delete(memory_id)

    def recall(
        self, owner: str, query: str | None, limit: int, max_tokens: int
    ) -> tuple[list[Memory], dict[str, float]]:
        """The owner's memories for `query`, best first, with scores where there are (the
        gateway's own retrieval); the newest without a query."""
        remote = self._remote()
        if query and query.strip():
            if remote is None:
                ranking = self._retriever.rank(
                    api_key_id=owner, query=query, settings=self._settings.get()
                )
                scores = {item.memory.id: item.score for item in ranking.items}
                return ranking.relevant(self._retriever.options.relevance_floor), scores
            asked = SearchQuery(query=query, api_key_id=owner, limit=limit, max_tokens=max_tokens)
            return remote.search(asked).memories, {}
        if remote is None:
            return self._store.find(MemoryFilter(api_key_id=owner), limit=limit), {}
        return remote.list(ListQuery(api_key_id=owner, limit=limit)).data, {}

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int:
        """Delete every match (all of them, in batches locally); return how many matched."""
        remote = self._remote()
        if remote is None:
            return bulk.clear(self._store, filters, dry_run=dry_run)
        doomed, offset = [], 0
        while True:
            listed = remote.listed(
                ListQuery(api_key_id=filters.api_key_id, type=filters.type,
                          session_id=filters.session_id, limit=PAGE, offset=offset)
            )  # fmt: skip
            doomed += [
                m for m in listed.page.data
                if not filters.created_before or m.created_at < filters.created_before
            ]  # fmt: skip
            offset += PAGE
            if not listed.fetched or offset >= listed.page.total:
                break
        if not dry_run:
            for memory in doomed:
                remote.delete(memory.id)
        return len(doomed)


def _counted(page: MemoryPage) -> MemoryPage:
    """A remote page with the token and injection counts of what it holds (tokens as the
    local list counts them)."""
    return dataclasses.replace(
        page,
        tokens_used=sum((len(m.content) + 3) // 4 for m in page.data),
        accessed=sum(1 for m in page.data if m.access_count > 0),
    )
