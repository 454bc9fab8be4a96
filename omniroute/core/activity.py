"""What the gateway did, minute by minute, for the studio's Activity view.

Recorded where the Prometheus counters are (a chat, the memories and tokens it injected, its
retrieval latency; an extraction job and its facts; tokens a summary or compaction saved),
but kept in the shared database, so that the view adds up every web and worker process and
survives restarts, which a process's counters do not. Counts gather in memory and go out as
one upsert per series and minute at most every FLUSH_SECONDS (a job flushes when it ends:
an RQ work horse exits right after). Minutes older than KEEP_DAYS are deleted as new ones
are written.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import delete, func, select

from omniroute.core.batched import Batched
from omniroute.core.db import Database
from omniroute.core.db.tables import activity

log = logging.getLogger(__name__)

FLUSH_SECONDS = 10.0
KEEP_DAYS = 8
# Upper bounds (ms) of the retrieval latency buckets; the last is everything slower.
LATENCY_BOUNDS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, math.inf)
COUNTS = (
    "chats",
    "injected",
    "tokens_added",
    "extractions",
    "facts",
    "tokens_saved",
    "rejected",  # chats refused with 503: MAX_OPEN_STREAMS were open
    "stream_seconds",  # seconds of open relays, each added when it ends: / step = average
)
# The windows the view shows: (minutes back, minutes a step).
WINDOWS = {"hour": (60, 1), "day": (24 * 60, 30), "week": (7 * 24 * 60, 180)}


def latency_series(bound: float) -> str:
    return f"retrieval_ms_le_{'inf' if math.isinf(bound) else bound}"


@dataclass
class Step:
    """One step of a window: its start (Unix seconds) and each series' total."""

    start: int
    totals: dict[str, float]

    def latency_percentile(self, q: float) -> float | None:
        """The q-th retrieval latency (ms), interpolated within its bucket as Prometheus'
        histogram_quantile does; None when no retrieval ran in the step."""
        counts = [self.totals.get(latency_series(bound), 0.0) for bound in LATENCY_BOUNDS_MS]
        total = sum(counts)
        if not total:
            return None
        rank, seen, lower = q * total, 0.0, 0.0
        for bound, count in zip(LATENCY_BOUNDS_MS, counts, strict=True):
            if count and seen + count >= rank:
                if math.isinf(bound):
                    return lower  # slower than the last bound: its lower edge
                return lower + (bound - lower) * (rank - seen) / count
            seen += count
            lower = bound
        return lower


class ActivityLog:
    def __init__(self, db: Database, clock=time.time, interval: float = FLUSH_SECONDS) -> None:
        self.db = db
        self._clock = clock
        self._batch = Batched(self._write, interval)
        self._pruned_at = 0.0

    def add(self, name: str, amount: float = 1) -> None:
        """Add to a series in the current minute."""
        if amount:
            self._batch.add({(int(self._clock()) // 60 * 60, name): amount})

    def retrieval(self, seconds: float) -> None:
        """Count one retrieval's latency in its bucket."""
        milliseconds = seconds * 1000
        bound = next(b for b in LATENCY_BOUNDS_MS if milliseconds <= b)
        self.add(latency_series(bound))

    def flush(self) -> None:
        """Write what gathered (a job's end)."""
        self._batch.flush()

    def close(self) -> None:
        """Write what gathered, and no more (a process' close)."""
        self._batch.close()

    def _write(self, pending: Counter) -> None:
        """One upsert that adds per series and minute; on a database error the counts wait
        for the next flush."""
        try:
            with self.db.write() as conn:
                for (minute, name), amount in sorted(pending.items()):
                    statement = self.db.insert(activity).values(
                        bucket=minute, name=name, value=amount
                    )
                    conn.execute(
                        statement.on_conflict_do_update(
                            index_elements=[activity.c.bucket, activity.c.name],
                            set_={"value": activity.c.value + statement.excluded.value},
                        )
                    )
                if self._clock() - self._pruned_at > 3600:
                    self._pruned_at = self._clock()
                    cutoff = int(self._clock()) - KEEP_DAYS * 86400
                    conn.execute(delete(activity).where(activity.c.bucket < cutoff))
        except Exception:
            log.exception("activity not written; kept for the next flush")
            self._batch.add(pending)

    def window(self, name: str) -> list[Step]:
        """The steps of a window (`hour`, `day`, `week`), oldest first, empty ones included."""
        back, step_minutes = WINDOWS[name]
        step = step_minutes * 60
        now = int(self._clock())
        first = (now - back * 60) // step * step + step
        steps = {start: Step(start, {}) for start in range(first, now + 1, step)}
        slot = (activity.c.bucket - first) // step
        query = (
            select(slot.label("slot"), activity.c.name, func.sum(activity.c.value))
            .where(activity.c.bucket >= first)
            .group_by("slot", activity.c.name)
        )
        with self.db.read() as conn:
            for index, series, total in conn.execute(query):
                start = first + int(index) * step
                if start in steps:
                    steps[start].totals[series] = float(total)
        return list(steps.values())
