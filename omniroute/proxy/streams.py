"""The chats one web process is relaying: how many, the cap on them, and the shutdown's cut.

Used only on the event loop (the front admits, releases and waits there), so it needs no lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

from omniroute.core.activity import ActivityLog
from omniroute.core.metrics import CHATS_REJECTED, OPEN_STREAMS


class OpenStreams:
    def __init__(self, cap: int, activity: ActivityLog) -> None:
        self.cap = cap
        self.open = 0
        self._activity = activity
        self._relays: set[anyio.CancelScope] = set()
        self.draining = False
        self.cut = False

    def admit(self) -> float | None:
        """Take a place for a new chat: its start time, or None when all `cap` are taken
        (counted as rejected)."""
        if self.open >= self.cap or self.draining:
            CHATS_REJECTED.inc()
            self._activity.add("rejected")
            return None
        self.open += 1
        OPEN_STREAMS.inc()
        return time.monotonic()

    def release(self, admitted: float) -> None:
        self.open -= 1
        OPEN_STREAMS.dec()
        # Stream-seconds per minute: the studio shows their average (open streams) per step.
        self._activity.add("stream_seconds", time.monotonic() - admitted)

    @contextmanager
    def cut_at_shutdown(self, scope: anyio.CancelScope) -> Iterator[None]:
        """Cancel `scope` (a relay's) when the shutdown's grace is over."""
        if self.cut:
            scope.cancel()
        self._relays.add(scope)
        try:
            yield
        finally:
            self._relays.discard(scope)

    def drain(self, grace_seconds: float) -> None:
        """Refuse new chats, and cut the open ones after `grace_seconds` (on the loop)."""
        self.draining = True
        asyncio.get_running_loop().call_later(grace_seconds, self._cut_all)

    def _cut_all(self) -> None:
        self.cut = True
        for scope in list(self._relays):
            scope.cancel()
