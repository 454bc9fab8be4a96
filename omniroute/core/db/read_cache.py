"""What every request reads from the database and seldom changes (settings, providers, the
key behind a secret), kept in the process for a few seconds.

A write through this process clears the cache at once; other processes (more web dynos, the
RQ worker) see a change after at most TTL_SECONDS. A read that began before a clear does not
cache what it read: a reader racing a write would otherwise keep the old value for the TTL.
Nothing is kept for a lookup that found nothing (a guessed key must not fill the cache).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import TTLCache

TTL_SECONDS = 5.0

V = TypeVar("V")


class ReadCache(Generic[V]):
    def __init__(self, maxsize: int, ttl: float = TTL_SECONDS) -> None:
        self._cache: TTLCache[Hashable, V] = TTLCache(maxsize, ttl)
        self._lock = threading.Lock()
        self._generation = 0  # bumped by every clear and forget
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, load: Callable[[], V | None]) -> V | None:
        """The cached value of `key`, else `load()`'s (kept unless it is None)."""
        with self._lock:
            cached = self._cache.get(key)
            generation = self._generation
            if cached is not None:
                self.hits += 1
                return cached
            self.misses += 1
        value = load()
        if value is not None:
            with self._lock:
                if generation == self._generation:
                    self._cache[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self._generation += 1
            self._cache.clear()

    def forget(self, *keys: Hashable) -> None:
        """Drop these keys; a read under way meanwhile is not kept either."""
        with self._lock:
            self._generation += 1
            for key in keys:
                self._cache.pop(key, None)
