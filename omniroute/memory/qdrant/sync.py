"""The dual-write job, backfill, verify and cleanup: Qdrant converges to the SQL store.

What Qdrant should hold: every live memory (not expired) within the retention setting, in the
collection of the current embedding signature. A run serves the outbox oldest first, each row
at most once: upserts embed the memory's text and write its point (a memory that is gone,
expired or past retention loses its point instead), deletes remove it. A new collection (the
first enable, a new model, a new base name) marks every memory: that is the backfill. Verify
counts points per tenant against the store and, where they differ, compares ids and repairs
(missing ones marked for upsert, extra ones deleted).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select

from ...clock import to_iso
from ...settings_store import SettingsStore
from ...tables import memories
from ..conditions import not_expired
from ..embedding.base import EmbeddingError, signature
from ..embedding.sources import EmbeddingSources
from ..model import Memory
from ..settings import MemorySettings
from ..store import MemoryStore
from .config import QdrantConfig, QdrantSettings
from .connection import QdrantUnavailable
from .index import Point, QdrantIndex, collection_name, stale_filter, tenant_filter, unix
from .outbox import UPSERT, Entry, QdrantOutbox

log = logging.getLogger(__name__)

BATCH_SIZE = 64
STATE_KEY = "qdrantSyncState"  # {"collection": the one backfilled last, "ready": caught up}


class SyncStopped(RuntimeError):
    """A run stopped on a failure; the rows it was serving stay for the next run."""


@dataclass
class SyncProgress:
    running: bool = False
    upserted: int = 0
    deleted: int = 0
    errors: int = 0
    last_error: str | None = None
    reason: str | None = None  # why the last run did nothing or stopped

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "upserted": self.upserted,
            "deleted": self.deleted,
            "errors": self.errors,
            "lastError": self.last_error,
            "reason": self.reason,
        }


@dataclass
class Target:
    """Where the points of this moment go: the config, its embedder and its collection."""

    config: QdrantConfig
    embedder: Any
    collection: str


@dataclass
class QdrantSync:
    store: MemoryStore
    outbox: QdrantOutbox
    index: QdrantIndex
    settings: QdrantSettings
    memory_settings: MemorySettings
    sources: EmbeddingSources
    state: SettingsStore
    progress: SyncProgress = field(default_factory=SyncProgress)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- where ----------------------------------------------------------------------------

    def embedder(self, config: QdrantConfig, settings: Mapping[str, Any]):
        """The embedder of Qdrant's vectors, or (None, why)."""
        if config.embedding_model:
            settings = {
                **settings,
                "embeddingSource": "remote",
                "embeddingProviderModel": config.embedding_model,
                "customBaseUrl": None,
            }
        resolution = self.sources.resolve(settings)
        return resolution.embedder, resolution.reason

    def target(self, settings: Mapping[str, Any] | None = None) -> Target:
        """The current target; QdrantUnavailable when there is none (the reason says why)."""
        config = self.settings.get()
        if not config.enabled:
            raise QdrantUnavailable("Qdrant is not enabled")
        embedder, reason = self.embedder(config, settings or self.memory_settings.get())
        if embedder is None:
            raise QdrantUnavailable(f"no embedding source for Qdrant ({reason})")
        return Target(config, embedder, collection_name(config.collection, signature(embedder)))

    def ready_collection(self) -> str | None:
        """The collection that holds every memory (its backfill finished), if any."""
        state = self.state.all().get(STATE_KEY) or {}
        return state.get("collection") if state.get("ready") else None

    # -- the job --------------------------------------------------------------------------

    def run(self, max_batches: int | None = None) -> SyncProgress:
        """Serve the outbox until it is empty (or `max_batches` ran); SyncStopped on failure."""
        with self._lock:
            self.progress = SyncProgress(running=True)
            try:
                self._run(max_batches)
            except (QdrantUnavailable, EmbeddingError) as exc:
                self.progress.reason = self.progress.last_error = str(exc)
                raise SyncStopped(str(exc)) from None
            finally:
                self.progress.running = False
        return self.progress

    def _run(self, max_batches: int | None) -> None:
        try:
            target = self.target()
        except QdrantUnavailable as exc:
            self.progress.reason = str(exc)
            return
        self.index.ensure(target.config, target.collection, target.embedder.dim)
        state = self.state.all().get(STATE_KEY) or {}
        if state.get("collection") != target.collection:
            marked = self.outbox.mark_all(*self._mirrored())
            log.info("Qdrant backfill of %s: %d memories marked", target.collection, marked)
            self.state.put({STATE_KEY: {"collection": target.collection, "ready": False}})
        served: list[str] = []
        batches = 0
        while max_batches is None or batches < max_batches:
            entries = self.outbox.take(BATCH_SIZE, served)
            if not entries:
                break
            served += [entry.memory_id for entry in entries]
            try:
                self._serve(target, entries)
            except (QdrantUnavailable, EmbeddingError) as exc:
                self.progress.errors += len(entries)
                self.outbox.failed(entries, str(exc))
                raise
            batches += 1
        if not self.outbox.stats()["pending"]:
            self.state.put({STATE_KEY: {"collection": target.collection, "ready": True}})

    def _serve(self, target: Target, entries: list[Entry]) -> None:
        wanted = [entry.memory_id for entry in entries if entry.action == UPSERT]
        with self.store.db.read() as conn:
            rows = conn.execute(
                select(memories).where(memories.c.id.in_(wanted), *self._mirrored())
            ).mappings()
            live = [Memory.from_row(row) for row in rows]
        kept = {memory.id for memory in live}
        gone = [entry.memory_id for entry in entries if entry.memory_id not in kept]
        if live:
            vectors = target.embedder.embed([memory.content for memory in live])
            points = [
                Point(
                    m.id, m.api_key_id, m.session_id, m.type, m.key, m.created_at, m.expires_at, v
                )
                for m, v in zip(live, vectors, strict=True)
            ]
            self.index.upsert(target.config, target.collection, points)
        if gone:
            self.index.delete(target.config, target.collection, gone)
        self.outbox.done(entries)
        self.progress.upserted += len(live)
        self.progress.deleted += len(gone)

    def _mirrored(self) -> list:
        """Conditions on `memories` for what Qdrant should hold."""
        days = self.memory_settings.get()["retentionDays"]
        cutoff = to_iso(self.store.clock() - timedelta(days=days))
        return [
            not_expired(memories.c.expires_at, self.store.now()),
            memories.c.created_at >= cutoff,
        ]

    # -- backfill, verify, cleanup --------------------------------------------------------

    def backfill(self) -> int:
        """Mark every memory Qdrant should hold (the next run writes them); return how many."""
        return self.outbox.mark_all(*self._mirrored())

    def verify(self, *, repair: bool = True) -> dict[str, Any]:
        """Points per tenant against the store; with `repair`, drift is marked or deleted."""
        target = self.target()
        config, name = target.config, target.collection
        self.index.ensure(config, name, target.embedder.dim)
        with self.store.db.read() as conn:
            counts = dict(
                conn.execute(
                    select(memories.c.api_key_id, func.count())
                    .where(*self._mirrored())
                    .group_by(memories.c.api_key_id)
                ).all()
            )
        points = self.index.tenants(config, name)
        report, missing_total, extra_total = [], 0, 0
        for tenant in sorted(set(counts) | set(points)):
            stored, held = counts.get(tenant, 0), points.get(tenant, 0)
            missing, extra = self._compare(target, tenant) if stored != held else (set(), set())
            if repair and (missing or extra):
                with self.store.db.write() as conn:
                    self.outbox.mark(conn, [(memory_id, tenant) for memory_id in missing], UPSERT)
                self.index.delete(config, name, extra)
            missing_total += len(missing)
            extra_total += len(extra)
            report.append(
                {
                    "apiKeyId": tenant,
                    "memories": stored,
                    "points": held,
                    "missing": len(missing),
                    "extra": len(extra),
                }
            )
        return {
            "collection": name,
            "tenants": report,
            "missing": missing_total,
            "extra": extra_total,
            "repaired": repair and bool(missing_total or extra_total),
        }

    def _compare(self, target: Target, tenant: str) -> tuple[set[str], set[str]]:
        with self.store.db.read() as conn:
            stored = set(
                conn.execute(
                    select(memories.c.id).where(memories.c.api_key_id == tenant, *self._mirrored())
                ).scalars()
            )
        held = self.index.ids(target.config, target.collection, tenant_filter(tenant))
        return stored - held, held - stored

    def cleanup(self) -> dict[str, Any]:
        """Delete points past expiry or retention, and points whose memory is gone."""
        target = self.target()
        days = self.memory_settings.get()["retentionDays"]
        now = self.store.clock()
        stale = self.index.delete_where(
            target.config,
            target.collection,
            stale_filter(now.timestamp(), unix(to_iso(now - timedelta(days=days)))),
        )
        orphans = self.verify(repair=True)["extra"]
        return {"ok": True, "deletedCount": stale + orphans, "retentionDays": days}
