"""The embedding backfill: give every memory that needs one a vector, in batches.

It runs by itself after writes and at start (the reference only ran it when a button was
pressed). Rows are read, embedded outside any transaction (embedding is slow), then written
only if their text is still what was embedded, so a concurrent edit never gets a stale vector.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from sqlalchemy import bindparam, func, select, update

from omniroute.core.db.tables import memories
from omniroute.memory.conditions import not_expired
from omniroute.memory.embedding.base import EmbeddingError, signature
from omniroute.memory.embedding.sources import EmbeddingSources
from omniroute.memory.search.vectors import VectorIndex
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryStore

log = logging.getLogger(__name__)

BATCH_SIZE = 64
# Marks a memory embedded; one statement for a whole batch of them.
EMBEDDED = (
    update(memories).where(memories.c.seq == bindparam("embedded_seq")).values(needs_reindex=0)
)


@dataclass
class Progress:
    running: bool = False
    processed: int = 0
    errors: int = 0
    last_error: str | None = None
    reason: str | None = None  # why the last run stopped early, if it did

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Backfill:
    store: MemoryStore
    index: VectorIndex
    sources: EmbeddingSources
    settings: MemorySettings
    progress: Progress = field(default_factory=Progress)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def pending(self) -> int:
        """Live memories still waiting for a vector."""
        with self.store.db.read() as conn:
            return conn.execute(
                select(func.count()).where(
                    memories.c.needs_reindex == 1,
                    not_expired(memories.c.expires_at, self.store.now()),
                )
            ).scalar_one()

    def mark_all_for_reindex(self) -> None:
        """Give every memory a new vector on the next run (force reindex)."""
        with self.store.db.write() as conn:
            conn.execute(update(memories).values(needs_reindex=1))

    def run(
        self,
        max_batches: int | None = None,
        batch_size: int = BATCH_SIZE,
        limit: int | None = None,
    ) -> Progress:
        """Embed pending memories until none is left (or `max_batches` ran, or `limit` were
        taken), `batch_size` at a time (a bulk import takes larger batches)."""
        if limit is not None:
            batch_size = min(batch_size, limit)
            max_batches = -(-limit // batch_size)
        if not self.store.db.vectors.available:
            vectors = self.store.db.vectors
            self.progress.reason = f"{vectors.backend} is not available: {vectors.error}"
            return self.progress
        with self._lock:  # one run at a time in this process
            self.progress = Progress(running=True)
            try:
                batches = 0
                while max_batches is None or batches < max_batches:
                    if not self._batch(batch_size):
                        break
                    batches += 1
            finally:
                self.progress.running = False
        return self.progress

    def _batch(self, size: int) -> bool:
        resolution = self.sources.resolve(self.settings.get())
        embedder = resolution.embedder
        if embedder is None:
            self.progress.reason = f"no embedding source ({resolution.reason})"
            return False
        with self.store.db.write() as conn:
            if self.index.prepare(conn, signature(embedder, self.index.quantization), embedder.dim):
                log.info("vector index reset for %s", signature(embedder, self.index.quantization))
            rows = conn.execute(
                select(memories.c.seq, memories.c.owner, memories.c.content)
                .where(
                    memories.c.needs_reindex == 1,
                    not_expired(memories.c.expires_at, self.store.now()),
                )
                .order_by(memories.c.created_at)
                .limit(size)
            ).all()
        if not rows:
            return False
        try:
            vectors = embedder.embed([content for _, _, content in rows])
        except EmbeddingError as exc:
            self.progress.errors += len(rows)
            self.progress.last_error = f"{exc.kind}: {exc}"
            self.progress.reason = self.progress.last_error
            log.warning("embedding backfill stopped: %s", self.progress.last_error)
            return False
        with self.store.db.write() as conn:
            current = dict(
                conn.execute(
                    select(memories.c.seq, memories.c.content).where(
                        memories.c.seq.in_([seq for seq, _, _ in rows])
                    )
                ).all()
            )
            unchanged = [
                (seq, owner, vector)
                for (seq, owner, content), vector in zip(rows, vectors, strict=True)
                if current.get(seq) == content
            ]
            if unchanged:
                conn.execute(EMBEDDED, [{"embedded_seq": seq} for seq, _, _ in unchanged])
            self.index.upsert(conn, unchanged)
        self.progress.processed += len(unchanged)
        return True
