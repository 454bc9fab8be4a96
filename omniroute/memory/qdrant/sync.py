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

import dataclasses
import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select

from omniroute.core.clock import to_iso
from omniroute.core.db.settings_store import SettingsStore
from omniroute.core.db.tables import memories
from omniroute.memory.conditions import not_expired
from omniroute.memory.embedding.base import EmbeddingError, signature
from omniroute.memory.embedding.sources import EmbeddingSources
from omniroute.memory.model import Memory
from omniroute.memory.qdrant.config import QdrantConfig, QdrantSettings
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.memory.qdrant.index import (
    Point,
    QdrantIndex,
    collection_name,
    live_filter,
    stale_filter,
    tenant_filter,
)
from omniroute.memory.qdrant.outbox import UPSERT, Entry, QdrantOutbox
from omniroute.memory.search.vectors import VectorIndex
from omniroute.memory.settings import MemoryConfig, MemorySettings
from omniroute.memory.store import MemoryStore

log = logging.getLogger(__name__)

BATCH_SIZE = 64
PROBE_TEXT = "omniroute qdrant connection check"
PROBE_TENANT = "omniroute-connection-check"  # no key has this id: the search finds nothing
# {"target": the Qdrant and collection backfilled last, "ready": whether it is caught up}
STATE_KEY = "qdrantSyncState"


class SyncStopped(RuntimeError):
    """A run stopped on a failure; the rows it was serving stay for the next run."""


@dataclass
class SyncProgress:
    running: bool = False
    upserted: int = 0
    reused: int = 0  # of those upserted, how many took the local index's vector
    deleted: int = 0
    errors: int = 0
    last_error: str | None = None
    reason: str | None = None  # why the last run did nothing or stopped

    def as_dict(self) -> dict[str, Any]:
        return {
            "running": self.running,
            "upserted": self.upserted,
            "reused": self.reused,
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

    @property
    def id(self) -> str:
        """A new server or folder holds none of the old one's points: it counts as new."""
        return f"{self.config.where}|{self.collection}"


@dataclass
class QdrantSync:
    store: MemoryStore
    outbox: QdrantOutbox
    index: QdrantIndex
    settings: QdrantSettings
    memory_settings: MemorySettings
    sources: EmbeddingSources
    state: SettingsStore
    local: VectorIndex | None = None  # the local vector index, whose vectors may be reused
    progress: SyncProgress = field(default_factory=SyncProgress)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # -- where ----------------------------------------------------------------------------

    def embedder(self, config: QdrantConfig, settings: MemoryConfig):
        """The embedder of Qdrant's vectors, or (None, why): Qdrant's own embedding model
        when it names one, else the memory settings' source."""
        if config.embedding_model:
            settings = dataclasses.replace(
                settings,
                embedding_source="remote",
                embedding_provider_model=config.embedding_model,
                custom_base_url=None,
            )
        resolution = self.sources.resolve(settings)
        return resolution.embedder, resolution.reason

    def target(self, settings: MemoryConfig | None = None) -> Target:
        """The current target; QdrantUnavailable when there is none (the reason says why)."""
        config = self.settings.get()
        if not config.enabled:
            raise QdrantUnavailable("Qdrant is not enabled")
        return self._target_of(config, settings)

    def _target_of(self, config: QdrantConfig, settings: MemoryConfig | None) -> Target:
        embedder, reason = self.embedder(config, settings or self.memory_settings.get())
        if embedder is None:
            raise QdrantUnavailable(f"no embedding source for Qdrant ({reason})")
        if config.vector_size:
            embedder, reason = self.sources.sized(embedder, config.vector_size)
            if embedder is None:
                raise QdrantUnavailable(f"vectorSize {config.vector_size}: {reason}")
        return Target(config, embedder, collection_name(config.collection, signature(embedder)))

    def is_ready(self, target: Target) -> bool:
        """Whether the target's backfill has finished (it holds every memory)."""
        state = self.state.all().get(STATE_KEY) or {}
        return state.get("target") == target.id and state.get("ready") is True

    def reset(self) -> None:
        """Qdrant was turned off: forget what it had yet to take, and backfill when it is
        turned on again (writes meanwhile were not recorded)."""
        self.outbox.clear()
        self.state.put({STATE_KEY: None})

    def check(self, config: QdrantConfig) -> None:
        """Whether this configuration can serve: healthy, an embedder, a search that works
        (the reference's PR #11213 asks for a search before enabling). Raises
        QdrantUnavailable, or EmbeddingError when the embedder fails."""
        health = self.index.connection.health(config)
        if not health.ok:
            raise QdrantUnavailable(f"Qdrant is not healthy: {health.error}")
        target = self._target_of(config, None)
        self.index.ensure(config, target.collection, target.embedder.dim)
        vector = target.embedder.embed([PROBE_TEXT])[0]
        self.index.search(config, target.collection, vector, 1, tenant_filter(PROBE_TENANT))

    def search(self, api_key_id: str, query: str, k: int) -> tuple[str, list[tuple[Memory, float]]]:
        """One key's k nearest live memories by Qdrant alone (the settings' search test)."""
        target = self.target()
        vector = target.embedder.embed([query], query=True)[0]
        where = live_filter([api_key_id], self.store.clock().timestamp(), created_after=None)
        hits = self.index.search(target.config, target.collection, vector, k, where)
        found = []
        for memory_id, score in hits:
            memory = self.store.get(memory_id)
            if memory is not None and memory.api_key_id == api_key_id:
                found.append((memory, score))
        return target.collection, found

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
        if state.get("target") != target.id:
            marked = self.outbox.mark_all(*self._mirrored())
            log.info("Qdrant backfill of %s: %d memories marked", target.id, marked)
            self.state.put({STATE_KEY: {"target": target.id, "ready": False}})
        finished = self._serve_all(target, max_batches)
        if finished and not self.is_ready(target):
            # The backfill is done; points of memories deleted while no one recorded it
            # (Qdrant turned off, another server's leftovers) go too, and what verify finds
            # missing is written; then Qdrant serves retrieval.
            if self.verify(repair=True)["missing"]:
                finished = self._serve_all(target, max_batches)
            if finished:
                self.state.put({STATE_KEY: {"target": target.id, "ready": True}})

    def _serve_all(self, target: Target, max_batches: int | None) -> bool:
        """Serve the outbox, each row once; True when it is empty afterwards."""
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
        return not self.outbox.stats()["pending"]

    def _serve(self, target: Target, entries: list[Entry]) -> None:
        wanted = [entry.memory_id for entry in entries if entry.action == UPSERT]
        with self.store.db.read() as conn:
            rows = list(
                conn.execute(
                    select(memories).where(memories.c.id.in_(wanted), *self._mirrored())
                ).mappings()
            )
            live = [Memory.from_row(row) for row in rows]
            vectors = self._local_vectors(conn, target, {row["id"]: row["seq"] for row in rows})
        kept = {memory.id for memory in live}
        gone = [entry.memory_id for entry in entries if entry.memory_id not in kept]
        if live:
            missing = [memory for memory in live if memory.id not in vectors]
            if missing:
                fresh = target.embedder.embed([memory.content for memory in missing])
                vectors.update(zip([memory.id for memory in missing], fresh, strict=True))
            points = [
                Point(
                    m.id, m.api_key_id, m.session_id, m.type, m.key, m.created_at, m.expires_at,
                    vectors[m.id], m.user_id,
                )
                for m in live
            ]  # fmt: skip
            self.index.upsert(target.config, target.collection, points)
            self.progress.reused += len(live) - len(missing)
        if gone:
            self.index.delete(target.config, target.collection, gone)
        self.outbox.done(entries)
        self.progress.upserted += len(live)
        self.progress.deleted += len(gone)

    def _local_vectors(self, conn, target: Target, seqs: dict[str, int]) -> dict[str, Any]:
        """The local index's vectors of these memories, when they are the ones Qdrant takes
        (same embedder, full precision): a memory is then embedded once, not twice. A held
        vector always matches its memory's text (a text change drops it in its transaction)."""
        if self.local is None or not seqs or not self.store.db.vectors.available:
            return {}
        indexed = self.local.meta(conn).signature
        if indexed != signature(target.embedder, self.local.quantization):
            return {}
        held = self.local.stored(conn, list(seqs.values()))
        return {memory_id: held[seq] for memory_id, seq in seqs.items() if seq in held}

    def _retained_since(self) -> datetime:
        """The oldest creation time retrieval still serves (the retention setting)."""
        return self.store.clock() - timedelta(days=self.memory_settings.get().retention_days)

    def _mirrored(self) -> list:
        """Conditions on `memories` for what Qdrant should hold."""
        return [
            not_expired(memories.c.expires_at, self.store.now()),
            memories.c.created_at >= to_iso(self._retained_since()),
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
        stale = self.index.delete_where(
            target.config,
            target.collection,
            stale_filter(self.store.clock().timestamp(), self._retained_since().timestamp()),
        )
        orphans = self.verify(repair=True)["extra"]
        days = self.memory_settings.get().retention_days
        return {"ok": True, "deletedCount": stale + orphans, "retentionDays": days}
