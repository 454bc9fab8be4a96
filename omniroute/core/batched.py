"""Counts that gather in memory and are written together, at most once per interval.

For what every request adds to (how often a memory was injected, the Activity view's
totals): writing each at once would make every request a write transaction. The first count
after a write starts a timer; `flush` (the timer, or a caller that must not wait) hands the
gathered counts to `write` in one go. A process killed without a flush loses at most one
interval's counts. Once closed, no timer starts: counts added later, or given back by a write
that failed at the close, stay unwritten (a closed process's database may be gone).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Hashable, Mapping


class Batched:
    def __init__(self, write: Callable[[Counter], None], interval: float) -> None:
        self._write = write
        self._interval = interval
        self._pending: Counter[Hashable] = Counter()
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._closed = False

    def add(self, counts: Mapping[Hashable, float]) -> None:
        with self._lock:
            self._pending.update(counts)
            if self._timer is None and not self._closed:
                self._timer = threading.Timer(self._interval, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write the counts gathered so far (nothing when there are none)."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if pending:
            self._write(pending)

    def close(self) -> None:
        """Write what gathered, the last time."""
        with self._lock:
            self._closed = True
        self.flush()
