"""The memory operations a face needs (MCP's tools today), on whichever backend serves: the
local store's own paths while it is primary (unchanged), the manager's otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import bulk
from ..model import Memory, MemoryFilter
from ..retrieval import Retriever
from ..settings import MemorySettings
from ..store import MemoryNotFound, MemoryStore
from .base import ListQuery, NewMemory, SearchQuery
from .manager import MemoryManager
from .setup import BackendSetup

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
                return [item.memory for item in ranking.items], scores
            asked = SearchQuery(query=query, api_key_id=owner, limit=limit, max_tokens=max_tokens)
            found = remote.search(asked).memories
            return [m for m in found if m.api_key_id == owner], {}
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
            page = remote.list(
                ListQuery(api_key_id=filters.api_key_id, type=filters.type,
                          session_id=filters.session_id, limit=PAGE, offset=offset)
            )  # fmt: skip
            doomed += [
                m for m in page.data
                if not filters.created_before or m.created_at < filters.created_before
            ]  # fmt: skip
            offset += PAGE
            if not page.data or offset >= page.total:
                break
        if not dry_run:
            for memory in doomed:
                remote.delete(memory.id)
        return len(doomed)
