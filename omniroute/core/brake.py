"""A brake on guessing the admin token: one per process, for every way in (/api, the studio
login, /mcp).

Wrong tokens are counted per client address. After MAX_FAILURES of them, each within
WINDOW_SECONDS of the one before, the address is held: it may have one token checked per
HELD_INTERVAL_SECONDS, and any other attempt in between is answered "too many" unchecked.
A token that is checked and right always gets in, and is then let through a held address
without waiting for a slot (an MCP session sends several requests in a second), so a guesser
cannot lock the admin out, even from the admin's own address (behind a shared proxy, say),
while guessing from a held address runs at one try a second at most.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from cachetools import TTLCache

log = logging.getLogger(__name__)

T = TypeVar("T")


class Held(Exception):
    """The address may not try a token now; `retry_after` says when it may."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"too many wrong admin tokens; retry after {retry_after} s")
        self.retry_after = retry_after


class GuessBrake:
    MAX_FAILURES = 10
    WINDOW_SECONDS = 300
    HELD_INTERVAL_SECONDS = 1.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: TTLCache[str, int] = TTLCache(10_000, self.WINDOW_SECONDS, timer=clock)
        self._last_check: TTLCache[str, float] = TTLCache(10_000, self.WINDOW_SECONDS, timer=clock)
        # (address, token digest) of tokens found right: they pass a held address at once.
        self._proven: TTLCache[tuple[str, str], bool] = TTLCache(
            10_000, self.WINDOW_SECONDS, timer=clock
        )
        self._lock = threading.Lock()

    def attempt(self, address: str | None, token: str, verify: Callable[[], T]) -> T:
        """Run `verify` (truthy: `token` is right) unless the address is held; raise Held.

        A falsy answer counts as a wrong guess from the address.
        """
        key = address or ""
        proof = (key, hashlib.sha256(token.encode("utf-8", "replace")).hexdigest())
        with self._lock:
            held = self._failures.get(key, 0) >= self.MAX_FAILURES
            if held and proof not in self._proven:
                now = self._clock()
                waited = now - self._last_check.get(key, -math.inf)
                if waited < self.HELD_INTERVAL_SECONDS:
                    raise Held(math.ceil(self.HELD_INTERVAL_SECONDS - waited))
                self._last_check[key] = now
        verdict = verify()
        with self._lock:
            if verdict:
                self._proven[proof] = True
            else:
                self._failures[key] = self._failures.get(key, 0) + 1
        if not verdict:
            log.warning("wrong admin token from %s", key or "an unknown address")
        return verdict
