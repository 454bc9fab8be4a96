"""Qdrant as the vector side of retrieval, and its part of the engine's report.

Used when Qdrant is enabled, the vector store setting says `qdrant` (enabling sets it) and
the current collection's backfill has finished; otherwise, or when Qdrant fails or is slower
than QDRANT_TIMEOUT_MS, retrieval falls back to the local index with the reason. After a
failure Qdrant is skipped for QDRANT_RETRY_SECONDS, so an outage costs one timeout, not one
per request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from omniroute.memory.embedding.base import EmbeddingError
from omniroute.memory.qdrant.connection import Health, QdrantUnavailable
from omniroute.memory.qdrant.index import live_filter, unix
from omniroute.memory.qdrant.sync import QdrantSync
from omniroute.memory.search.reach import Reach
from omniroute.memory.settings import MemoryConfig

HEALTH_CACHE_SECONDS = 5.0


class QdrantTier:
    def __init__(
        self,
        sync: QdrantSync,
        *,
        retry_seconds: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sync = sync
        self._retry_seconds = retry_seconds
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down_reason: str | None = None
        self._health: tuple[float, tuple, Health] | None = None

    def selected(self, settings: MemoryConfig) -> bool:
        """Whether retrieval should ask Qdrant first."""
        return settings.vector_store == "qdrant" and self.sync.settings.enabled()

    def nearest(
        self, settings: MemoryConfig, live: Reach, query: str, k: int
    ) -> tuple[list[tuple[str, float]], Any]:
        """The partitions' k nearest memory ids with their similarity, and the embedder used.

        QdrantUnavailable says why Qdrant cannot answer this time; an answer with no point
        is one too, as the specification has it: the local index is asked then (a memory
        whose point is still on its way is found there)."""
        if paused := self.paused():
            raise QdrantUnavailable(paused)
        target = self.sync.target(settings)
        if not self.sync.is_ready(target):
            pending = self.sync.outbox.stats()["pending"]
            raise QdrantUnavailable(
                f"Qdrant is catching up: {pending} memories wait to be written to "
                f"{target.collection}"
            )
        try:
            vector = target.embedder.embed([query], query=True)[0]
        except EmbeddingError as exc:
            raise QdrantUnavailable(f"embedding for Qdrant failed ({exc.kind}): {exc}") from None
        where = live_filter(
            live.owners,
            self.sync.store.clock().timestamp(),
            session_id=live.session_id,
            created_after=unix(live.created_after),
        )
        try:
            hits = self.sync.index.search(target.config, target.collection, vector, k, where)
        except QdrantUnavailable as exc:
            with self._lock:
                self._down_until = self._monotonic() + self._retry_seconds
                self._down_reason = str(exc)
            raise
        if not hits:
            raise QdrantUnavailable("Qdrant found no point; the local index was asked")
        return hits, target.embedder

    def health(self) -> Health:
        """The configured Qdrant's health, probed at most every few seconds."""
        config = self.sync.settings.get()
        fingerprint = (config.url, config.path, config.api_key)
        now = self._monotonic()
        cached = self._health
        if cached and cached[1] == fingerprint and now - cached[0] < HEALTH_CACHE_SECONDS:
            return cached[2]
        health = self.sync.index.connection.health(config)
        self._health = (now, fingerprint, health)
        return health

    def paused(self) -> str | None:
        """Why retrievals skip Qdrant now (a recent failure), or None."""
        with self._lock:
            left = self._down_until - self._monotonic()
            if left > 0:
                return f"{self._down_reason} (trying again in {left:.0f} s)"
        return None

    def status(self, settings: MemoryConfig) -> dict[str, Any]:
        """The `qdrant` block of engine-status."""
        config = self.sync.settings.get()
        report: dict[str, Any] = {
            "enabled": config.enabled,
            "configured": config.configured,
            "mode": config.mode,
            "where": config.where,
            "quantization": config.quantization,
            "collection": None,
            "healthy": None,
            "latencyMs": None,
            "error": None,
            "ready": False,
            "usedForRetrieval": False,
            "reason": None,
            "points": None,
            "outbox": self.sync.outbox.stats(),
            "sync": self.sync.progress.as_dict(),
        }
        if not config.enabled:
            report["reason"] = "Qdrant is not enabled"
            return report
        health = self.health()
        report.update(healthy=health.ok, latencyMs=round(health.latency_ms, 1), error=health.error)
        try:
            target = self.sync.target(settings)
        except QdrantUnavailable as exc:
            report["reason"] = str(exc)
            return report
        report["collection"] = target.collection
        report["ready"] = self.sync.is_ready(target)
        if health.ok:
            try:
                if self.sync.index.exists(config, target.collection):
                    report["points"] = self.sync.index.count(config, target.collection)
            except QdrantUnavailable as exc:
                report["error"] = str(exc)
        paused = self.paused()
        report["usedForRetrieval"] = bool(
            health.ok and not paused and report["ready"] and settings.vector_store == "qdrant"
        )
        if not report["usedForRetrieval"]:
            report["reason"] = (
                health.error
                or paused
                or (None if report["ready"] else "the backfill has not finished")
                or "the vector store setting is not qdrant"
            )
        return report
