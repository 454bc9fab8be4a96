"""What a process's RAM copies of large keys share (vector_cache.py, keyword_cache.py): each
key's copy is built on one background thread the first time the key is searched, a key
found too small is looked at again RECHECK_SECONDS later, and the copies together stay under
a bound of bytes, past which a key is left to the store's own search."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

log = logging.getLogger(__name__)

RECHECK_SECONDS = 60  # how long a key found too small is left alone


class Copy(Protocol):
    @property
    def nbytes(self) -> int: ...

    def __len__(self) -> int: ...


C = TypeVar("C", bound=Copy)


class KeyCopies(Generic[C]):
    """The copies by owner, and the thread that builds them. A subclass reads a key in
    `_read_key(owner, *args)`: its copy, or None when the key is too small or too large."""

    what = "copy"  # for the log: "vectors", "keyword index"

    def __init__(self, max_bytes: int, thread_name: str) -> None:
        self.max_bytes = max_bytes
        self._held: dict[str, C] = {}
        self._checked: dict[str, float] = {}  # owner -> when it was found too small
        self._building: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        self._closing = False

    def _read_key(self, owner: str, *args: Any) -> C | None:
        raise NotImplementedError

    def _consider(self, owner: str, *args: Any, again: bool = False) -> None:
        """Build the owner's copy in the background, unless one is being built, the key was
        found too small a moment ago (`again` builds it all the same), or it is closing."""
        with self._lock:
            if owner in self._building or self._closing:
                return
            last = self._checked.get(owner, -RECHECK_SECONDS)
            if not again and time.monotonic() - last < RECHECK_SECONDS:
                return
            self._building.add(owner)
        self._pool.submit(self._build, owner, *args)

    def _build(self, owner: str, *args: Any) -> None:
        try:
            copy = self._read_key(owner, *args)
            if copy is None:
                with self._lock:
                    self._checked[owner] = time.monotonic()
                return
            with self._lock:
                self._held[owner] = copy
            log.info("the %s of a key of %d memories held in RAM (%d MB)", self.what,
                     len(copy), copy.nbytes // 2**20)  # fmt: skip
        except Exception:  # the store keeps answering; the next search tries again
            log.exception("the %s of a key was not built", self.what)
        finally:
            with self._lock:
                self._building.discard(owner)

    def _fits(self, size: int, owner: str) -> bool:
        """Whether `size` more bytes for this key keep every copy under the bound."""
        with self._lock:
            held = sum(copy.nbytes for key, copy in self._held.items() if key != owner)
        if held + size <= self.max_bytes:
            return True
        log.warning("a large key stays with the store's search: its %s is past the RAM bound",
                    self.what)  # fmt: skip
        return False

    def _forget(self, owner: str) -> None:
        with self._lock:
            self._held.pop(owner, None)

    def wait(self) -> None:
        """Let a build in progress finish (tests, shutdown)."""
        self._pool.submit(lambda: None).result()

    def _stop_building(self) -> None:
        with self._lock:
            self._closing = True
        self._pool.shutdown(wait=True)
