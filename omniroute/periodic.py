"""Periodic work of a process: a daemon thread that runs a task at once, then every interval.

Each task is idempotent and cheap when there is nothing to do, so every process may run it
(a web process with or without Redis, a second web process, the worker).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from flask import Flask

log = logging.getLogger(__name__)


class Periodic:
    def __init__(self, app: Flask, name: str, interval: float, task: Callable[[], object]) -> None:
        self._app = app
        self._name = name
        self._interval = interval
        self._task = task
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"omniroute-{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                with self._app.app_context():
                    self._task()
            except Exception:
                log.exception(
                    "periodic task %s failed; trying again in %g s", self._name, self._interval
                )
            self._stop.wait(self._interval)
