"""An LRU cache with a time limit in front of any embedder."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
from cachetools import TTLCache

from omniroute.memory.embedding.base import Embedder


class CachedEmbedder:
    """Embeds only the texts it has not seen lately; keys `{source}:{model}:{dim}:{q|p}:{sha256}`
    (a query and a memory of the same text are embedded apart by an asymmetric model)."""

    def __init__(self, inner: Embedder, max_entries: int, ttl_seconds: float) -> None:
        self.inner = inner
        self.source, self.model, self.dim = inner.source, inner.model, inner.dim
        self._cache: TTLCache[str, np.ndarray] = TTLCache(max_entries, ttl_seconds)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, text: str, query: bool) -> str:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return f"{self.source}:{self.model}:{self.dim}:{'q' if query else 'p'}:{digest}"

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        keys = [self._key(text, query) for text in texts]
        found: dict[int, np.ndarray] = {}
        with self._lock:
            for index, key in enumerate(keys):
                vector = self._cache.get(key)
                if vector is not None:
                    found[index] = vector
            self.hits += len(found)
            self.misses += len(texts) - len(found)
        missing = [index for index in range(len(texts)) if index not in found]
        if missing:
            fresh = self.inner.embed([texts[index] for index in missing], query=query)
            with self._lock:
                for index, vector in zip(missing, fresh, strict=True):
                    self._cache[keys[index]] = vector
                    found[index] = vector
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([found[index] for index in range(len(texts))])

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "size": len(self._cache)}
