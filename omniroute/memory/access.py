"""Access telemetry: how often each memory was injected, written in batches.

A busy gateway injects memories into every request. Writing their counts at once would make
every request a write transaction (and a few pages of WAL); instead the counts gather here
and are written together, at most once per interval. A process killed without `flush` loses
at most that interval's counts.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from .store import MemoryStore

FLUSH_INTERVAL_SECONDS = 1.0


class AccessRecorder:
    def __init__(self, store: MemoryStore, interval: float = FLUSH_INTERVAL_SECONDS) -> None:
        self._store = store
        self._interval = interval
        self._pending: Counter[str] = Counter()
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def record(self, memory_ids: Iterable[str]) -> None:
        """Count one injection of each memory (an id given twice counts once)."""
        with self._lock:
            self._pending.update(set(memory_ids))
            if self._timer is None:
                self._timer = threading.Timer(self._interval, self.flush)
                self._timer.daemon = True
                self._timer.start()

    def flush(self) -> None:
        """Write the counts gathered so far."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        if pending:
            self._store.record_access(pending)
