"""The retention sweep: deleting what no read would ever return again.

Every read already leaves these memories out; the sweep makes the database agree, so that a
service left running for a year holds what is alive (and the summaries of what aged out):

- `expired`: past `expiresAt` (always);
- `retention`: created more than `retentionDays` ago and not injected since that cutoff,
  when the `retentionSweep` setting is on (off, they stay stored, only never injected);
- `decay`: episodic memories past typed decay's age (decay.py), when decay is on.

Each deletion goes through the store, in batches of SWEEP_BATCH: its vector and keyword row
go with it, a history row records the reason, Qdrant is told through its outbox, and no
batch holds the write lock for long, so chat traffic writes between batches.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, or_

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memories
from omniroute.memory.life.bulk import DELETE_BATCH, delete_where
from omniroute.memory.life.decay import DecayPolicy
from omniroute.memory.search.change_log import prune as prune_changes
from omniroute.memory.settings import MemorySettings
from omniroute.memory.store import MemoryStore

SWEEP_BATCH = DELETE_BATCH


@dataclass
class SweepReport:
    expired: int = 0
    retention: int = 0
    decay: int = 0
    changes: int = 0  # PostgreSQL's memory_changes older than a day (change_log.py)
    batch_ms: list[float] = field(default_factory=list)  # each batch's write-lock hold
    off: list[str] = field(default_factory=list)  # which deletions are switched off, and why

    def heard(self, count: int, seconds: float) -> None:
        if count:
            self.batch_ms.append(seconds * 1000)

    @property
    def batches(self) -> int:
        return len(self.batch_ms)

    @property
    def longest_batch_ms(self) -> float:
        return max(self.batch_ms, default=0.0)

    @property
    def median_batch_ms(self) -> float:
        return statistics.median(self.batch_ms) if self.batch_ms else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "expired": self.expired,
            "retention": self.retention,
            "decay": self.decay,
            "changesPruned": self.changes,
            "batches": self.batches,
            "medianBatchMs": round(self.median_batch_ms, 1),
            "longestBatchMs": round(self.longest_batch_ms, 1),
            "off": self.off,
        }


class RetentionSweep:
    def __init__(
        self,
        store: MemoryStore,
        settings: MemorySettings,
        decay: DecayPolicy,
        batch: int = SWEEP_BATCH,
    ) -> None:
        self.store = store
        self.settings = settings
        self.decay = decay
        self.batch = batch

    def run(self) -> SweepReport:
        report = SweepReport()
        report.expired = self._delete(self._expired, "expired", report)
        settings = self.settings.get()
        if settings.retention_sweep:
            days = settings.retention_days
            report.retention = self._delete(self._retention(days), "retention", report)
        else:
            report.off.append("retention: the retentionSweep setting is off")
        if self.decay.enabled:
            doomed = self.decay.doomed
            report.decay = self._delete(lambda _now: doomed(self.store.clock()), "decay", report)
        else:
            report.off.append("decay: MEMORY_TYPED_DECAY_ENABLED is off")
        if self.store.db.dialect == "postgresql":
            with self.store.db.write() as conn:
                report.changes = prune_changes(conn)
        return report

    def _delete(
        self, conditions: Callable[[str], list[ColumnElement[bool]]], reason: str, report
    ) -> int:
        return delete_where(
            self.store, conditions, reason=reason, batch=self.batch, on_batch=report.heard
        )

    @staticmethod
    def _expired(now: str) -> list[ColumnElement[bool]]:
        return [memories.c.expires_at.is_not(None), memories.c.expires_at <= now]

    def _retention(self, days: int) -> Callable[[str], list[ColumnElement[bool]]]:
        def conditions(_now: str) -> list[ColumnElement[bool]]:
            cutoff = to_iso(self.store.clock() - timedelta(days=days))
            return [
                memories.c.created_at < cutoff,
                or_(memories.c.last_accessed_at.is_(None), memories.c.last_accessed_at < cutoff),
            ]

        return conditions
