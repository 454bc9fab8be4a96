"""The MemoryManager: one primary backend and ordered fallbacks (REFERENCE section 13).

- create and list go to the primary only;
- get asks the primary, then each fallback while the answer is none (or an error);
- update and delete return the primary's answer, and reach every fallback in the
  background; a fallback's failure is logged and counted (BACKEND_SYNC), never lost
  silently as the reference's fire-and-forget calls are;
- search asks the primary, and on an error each fallback in turn; when all fail the answer
  is empty. Which backend answered, and why the primary did not, come back with it.
- `configure` refuses an unknown primary (UnknownBackend) and drops unknown fallbacks.

Every face (the proxy's recall, the REST API, MCP, the studio) reaches memory through the
manager, whichever backend is primary, the local store included. A backend's answer enters
the process here: a list, a search or a key lookup made for one key keeps that key's
memories alone, whatever the service sent (`owned_by`: the others are dropped and counted in
FOREIGN_MEMORIES), so no route can show or delete another key's memories.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from omniroute.core.metrics import BACKEND_SYNC
from omniroute.memory.backends.base import (
    BackendError,
    Health,
    ListQuery,
    MemoryBackend,
    NewMemory,
    SearchQuery,
    named,
    owned_by,
    visible_to,
)
from omniroute.memory.model import Memory, MemoryFilter, MemoryPage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Listed:
    """A page of the owner's memories, and how many the backend sent (`fetched`: the
    foreign ones too), so that paging goes on past a page the filter emptied."""

    page: MemoryPage
    fetched: int


class UnknownBackend(ValueError):
    """No backend of this id is registered."""


@dataclass(frozen=True)
class Found:
    """A search's memories, the backend that answered, and why the primary did not; with
    the answering backend's scores, and how it ranked (`strategy`, its own fallback)."""

    memories: list[Memory]
    backend: str | None
    fallback_reason: str | None = None
    failed: tuple[str, ...] = ()  # the backends that failed first, in order
    scores: Mapping[str, float] = dataclasses.field(default_factory=dict)
    strategy: str = "none"
    ranking_fell_back: bool = False


class MemoryManager:
    def __init__(self, primary: MemoryBackend, aliases: Mapping[str, str] | None = None) -> None:
        """`primary` serves until `configure` says otherwise; `aliases` are other names of
        registered backends (the local store's `sqlite`)."""
        self._aliases = dict(aliases or {})
        self._backends: dict[str, MemoryBackend] = {primary.id: primary}
        self._primary = primary.id
        self._fallbacks: tuple[str, ...] = ()
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="omniroute-backend")
        self._pending: set[Future] = set()

    # -- registry -------------------------------------------------------------------------

    def register(self, backend: MemoryBackend) -> None:
        self._backends[backend.id] = backend

    def configure(self, primary: str, fallbacks: list[str] | tuple[str, ...] = ()) -> None:
        self._primary, self._fallbacks = self._chosen(self._backends, primary, fallbacks)

    def replace(
        self,
        retired: Collection[str],
        added: Collection[MemoryBackend],
        primary: str,
        fallbacks: list[str] | tuple[str, ...] = (),
    ) -> None:
        """Swap backends in one step (a request in another thread sees the old set or the
        new, never a mix): the `retired` ids leave, `added` come in, and the primary and
        fallbacks are chosen among the result; the retired ones are shut down after.
        UnknownBackend (nothing changed) when the primary is not among them."""
        backends = {i: b for i, b in self._backends.items() if i not in retired}
        backends.update((backend.id, backend) for backend in added)
        chosen = self._chosen(backends, primary, fallbacks)
        gone = [b for i, b in self._backends.items() if backends.get(i) is not b]
        self._backends, (self._primary, self._fallbacks) = backends, chosen
        for backend in gone:
            backend.shutdown()

    def _chosen(
        self, backends: Mapping[str, MemoryBackend], primary: str, fallbacks: Iterable[str]
    ) -> tuple[str, tuple[str, ...]]:
        primary = self._aliases.get(primary, primary)
        fallbacks = [self._aliases.get(name, name) for name in fallbacks]
        if primary not in backends:
            raise UnknownBackend(
                f"unknown backend {primary!r}: registered are {', '.join(sorted(backends))}"
            )
        dropped = [f for f in fallbacks if f not in backends]
        if dropped:
            log.warning("unknown fallback backends dropped: %s", ", ".join(dropped))
        return primary, tuple(dict.fromkeys(f for f in fallbacks if f in backends and f != primary))

    @property
    def primary(self) -> MemoryBackend:
        return self._backends[self._primary]

    @property
    def fallbacks(self) -> list[MemoryBackend]:
        return [self._backends[f] for f in self._fallbacks]

    def registered(self) -> list[dict[str, Any]]:
        return [
            {
                "id": backend.id,
                "displayName": backend.display_name,
                "backendType": backend.backend_type,
                "isPrimary": backend.id == self._primary,
                "isFallback": backend.id in self._fallbacks,
            }
            for backend in self._backends.values()
        ]

    def backend(self, backend_id: str) -> MemoryBackend:
        try:
            return self._backends[self._aliases.get(backend_id, backend_id)]
        except KeyError:
            raise UnknownBackend(f"unknown backend {backend_id!r}") from None

    # -- memories -------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> Memory:
        return self.primary.create(memory)

    def list(self, query: ListQuery) -> MemoryPage:
        return self.listed(query).page

    def listed(self, query: ListQuery) -> Listed:
        page = self.primary.list(query)
        data = owned_by(query.api_key_id, page.data, self.primary.id)
        return Listed(dataclasses.replace(page, data=data), len(page.data))

    def page(self, filters: MemoryFilter, *, limit: int, offset: int) -> MemoryPage:
        """A page of the primary's with its counts (the owner's memories alone)."""
        page = self.primary.page(filters, limit=limit, offset=offset)
        return dataclasses.replace(
            page, data=owned_by(filters.api_key_id, page.data, self.primary.id)
        )

    def find_key(self, api_key_id: str, key: str, user_id: str = "") -> Memory | None:
        """The owner's (its end user's, if named) memory with this key on the primary."""
        found = self.primary.find_key(api_key_id, key, user_id)
        return next(iter(owned_by(api_key_id, [found] if found else [], self.primary.id)), None)

    def upsert(self, memory: NewMemory) -> tuple[Memory, bool]:
        """Create on the primary, or update the owner's memory of the same key there (and on
        the fallbacks); whether it was created."""
        stored, created = self.primary.upsert(memory)
        if not created:
            changes = {
                "content": stored.content,
                "type": stored.type,
                "session_id": stored.session_id,
                "metadata": stored.metadata,
                "expires_at": stored.expires_at,
            }
            self._to_fallbacks("update", lambda b: b.update(stored.id, changes))
        return stored, created

    def amend(self, memory: Memory, changes: Mapping[str, Any]) -> Memory:
        """`memory` changed on the primary and read back (MemoryNotFound when it is gone),
        the change sent on to the fallbacks."""
        changed = self.primary.amend(memory, changes)
        self._to_fallbacks("update", lambda b: b.update(memory.id, changes))
        return changed

    def get(self, memory_id: str) -> Memory | None:
        for backend in (self.primary, *self.fallbacks):
            try:
                found = backend.get(memory_id)
            except BackendError as exc:
                log.warning("backend %s: get failed: %s", named(backend), exc)
                continue
            if found is not None:
                return found
        return None

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        result = self.primary.update(memory_id, changes)
        self._to_fallbacks("update", lambda b: b.update(memory_id, changes))
        return result

    def delete(self, memory_id: str) -> bool:
        result = self.primary.delete(memory_id)
        self._to_fallbacks("delete", lambda b: b.delete(memory_id))
        return result

    def clear(self, filters: MemoryFilter, *, dry_run: bool) -> int:
        """Delete the primary's matches (how many matched); each fallback clears its own."""
        matched = self.primary.clear(filters, dry_run=dry_run)
        if not dry_run:
            self._to_fallbacks("clear", lambda b: b.clear(filters, dry_run=False))
        return matched

    def search(self, query: SearchQuery) -> Found:
        reasons, failed = [], []
        for backend in (self.primary, *self.fallbacks):
            try:
                recalled = backend.recall(query)
            except BackendError as exc:
                log.warning("backend %s: search failed: %s", named(backend), exc)
                reasons.append(f"{backend.id}: {exc}")
                failed.append(backend.id)
                continue
            memories = visible_to(query, recalled.memories, backend.id)
            return Found(
                memories, backend.id, "; ".join(reasons) or None, tuple(failed),
                recalled.scores, recalled.strategy, recalled.fallback_reason is not None,
            )  # fmt: skip
        return Found([], None, "; ".join(reasons), tuple(failed))

    def health(self) -> dict[str, Health]:
        return {backend_id: backend.health() for backend_id, backend in self._backends.items()}

    def initialize_all(self, ids: Iterable[str] | None = None) -> dict[str, str | None]:
        """Initialise every backend, or those of `ids` (a remote one checks that it answers):
        by id, None when it is ready or why it is not. A backend that is down stays
        registered: its calls fail over to the fallbacks until it answers."""
        states: dict[str, str | None] = {}
        chosen = self._backends if ids is None else {i: self._backends[i] for i in ids}
        for backend_id, backend in list(chosen.items()):
            try:
                backend.initialize()
                states[backend_id] = None
            except Exception as exc:  # any backend's failure is logged, never raised here
                log.warning("memory backend %s not ready: %s", named(backend), exc)
                states[backend_id] = str(exc)
        return states

    # -- background -----------------------------------------------------------------------

    def _to_fallbacks(self, operation: str, call) -> None:
        for backend in self.fallbacks:
            future = self._pool.submit(self._synced, backend, operation, call)
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)

    def _synced(self, backend: MemoryBackend, operation: str, call) -> None:
        try:
            call(backend)
        except Exception as exc:  # counted and logged: a fallback may lag, never silently
            BACKEND_SYNC.labels(backend.id, operation, "failed").inc()
            log.warning("backend %s: %s not applied: %s", named(backend), operation, exc)
            return
        BACKEND_SYNC.labels(backend.id, operation, "ok").inc()

    def wait(self) -> None:
        """Let the background calls to the fallbacks finish (tests, shutdown)."""
        for future in list(self._pending):
            future.result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)
        for backend in self._backends.values():
            backend.shutdown()
