"""The local store as a backend: SQLite or PostgreSQL, whichever DATABASE_URL selects,
with the retriever's ranking (keyword, vectors, fusion, rerank) as its search. Every call
is the store's own (an upsert in one transaction, counts over all matches, a clear in
batches), not derived from the seven."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from omniroute.memory.backends.base import (
    Health,
    ListQuery,
    NewMemory,
    Recalled,
    SearchQuery,
    Stateless,
    elapsed_ms,
)
from omniroute.memory.life import bulk
from omniroute.memory.listing import list_page
from omniroute.memory.model import Memory, MemoryFilter, MemoryPage
from omniroute.memory.search.retrieval import Retriever
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryNotFound, MemoryStore

LOCAL_ID = "local"
# The names the settings may give it: the reference's "sqlite", and the other dialect's.
LOCAL_ALIASES = {"sqlite": LOCAL_ID, "postgresql": LOCAL_ID}


class LocalBackend(Stateless):
    id = LOCAL_ID
    backend_type = "local"

    def __init__(self, store: MemoryStore, retriever: Retriever, settings: MemorySettings) -> None:
        self.store = store
        self.retriever = retriever
        self.settings = settings
        dialect = "PostgreSQL" if store.db.dialect == "postgresql" else "SQLite"
        self.display_name = f"Local store ({dialect})"

    def health(self) -> Health:
        started = time.perf_counter()
        try:
            self.store.find(MemoryFilter(api_key_id="health-check"), limit=1)
        except Exception as exc:  # the database is down: say so, do not raise
            return Health(False, elapsed_ms(started), f"{type(exc).__name__}: {exc}")
        return Health(True, elapsed_ms(started))

    def create(self, memory: NewMemory) -> Memory:
        return self.upsert(memory)[0]

    def upsert(self, memory: NewMemory) -> tuple[Memory, bool]:
        return self.store.create(**memory.fields())

    def get(self, memory_id: str) -> Memory | None:
        return self.store.get(memory_id)

    def find_key(self, api_key_id: str, key: str, user_id: str = "") -> Memory | None:
        return self.store.get_by_key(api_key_id, key, user_id)

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        try:
            self.store.update(memory_id, **changes)
        except MemoryNotFound:
            return False
        return True

    def amend(self, memory: Memory, changes: Mapping[str, Any]) -> Memory:
        return self.store.update(memory.id, **changes)

    def delete(self, memory_id: str) -> bool:
        return self.store.delete(memory_id)

    def list(self, query: ListQuery) -> MemoryPage:
        filters = MemoryFilter(
            api_key_id=query.api_key_id, type=query.type, session_id=query.session_id,
            text=query.query,
        )  # fmt: skip
        return self.page(filters, limit=query.limit, offset=query.offset)

    def page(self, filters: MemoryFilter, *, limit: int, offset: int) -> MemoryPage:
        return list_page(self.store, filters, limit=limit, offset=offset)

    def search(self, query: SearchQuery) -> list[Memory]:
        return self.recall(query).memories

    def recall(self, query: SearchQuery) -> Recalled:
        """The retriever's ranking above the relevance floor, at most `limit`, with scores."""
        ranking = self.retriever.rank(
            api_key_id=query.api_key_id,
            query=query.query,
            settings=query.settings or self.settings.get(),
            strategy=query.strategy,
            session_id=query.session_id,
            user_id=query.user_id,
            include_global=query.include_global,
        )
        memories = ranking.relevant(self.retriever.options.relevance_floor)[: max(0, query.limit)]
        scores = {item.memory.id: item.score for item in ranking.items}
        return Recalled(memories, ranking.strategy_used, scores, ranking.fallback_reason)

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int:
        return bulk.clear(self.store, filters, dry_run=dry_run)
