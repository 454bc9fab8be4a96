"""The interface every memory backend implements, and the values it speaks in.

A backend stores memories of many keys; every call names the key it acts for (a create
carries `api_key_id`, a list or search filters by it), so a backend never hands one key's
memories to another key's request.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from omniroute.memory.model import Memory, MemoryPage


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


@dataclass(frozen=True)
class SearchQuery:
    query: str
    api_key_id: str
    limit: int = 20
    max_tokens: int | None = None
    strategy: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


class MemoryBackend(Protocol):
    id: str
    display_name: str

    def create(self, memory: NewMemory) -> Memory: ...

    def get(self, memory_id: str) -> Memory | None: ...

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool: ...

    def delete(self, memory_id: str) -> bool: ...

    def list(self, query: ListQuery) -> MemoryPage: ...

    def search(self, query: SearchQuery) -> list[Memory]: ...

    def health(self) -> Health: ...

    def initialize(self) -> None: ...

    def shutdown(self) -> None: ...


class Stateless:
    """initialize and shutdown for a backend that holds nothing between calls."""

    def initialize(self) -> None:
        pass

    def shutdown(self) -> None:
        pass
