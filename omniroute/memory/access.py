"""Access telemetry: how often each memory was injected, written in batches.

A busy gateway injects memories into every request. Writing their counts at once would make
every request a write transaction (and a few pages of WAL); instead the counts gather (see
omniroute/batched.py) and are written together, at most once per interval.
"""

from __future__ import annotations

from collections.abc import Iterable

from omniroute.core.batched import Batched
from omniroute.memory.store import MemoryStore

FLUSH_INTERVAL_SECONDS = 1.0


class AccessRecorder:
    def __init__(self, store: MemoryStore, interval: float = FLUSH_INTERVAL_SECONDS) -> None:
        self._batch = Batched(store.record_access, interval)

    def record(self, memory_ids: Iterable[str]) -> None:
        """Count one injection of each memory (an id given twice counts once)."""
        self._batch.add(dict.fromkeys(memory_ids, 1))

    def flush(self) -> None:
        """Write the counts gathered so far."""
        self._batch.flush()

    def close(self) -> None:
        """Write the counts gathered so far, and no more."""
        self._batch.close()
