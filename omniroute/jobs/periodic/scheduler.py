"""The in-process scheduler: a daemon thread that triggers the periodic jobs when they are due.

One per data dir, not one per process: the thread works only while it holds an exclusive
lock on `<DATA_DIR>/scheduler.lock` (a second process on the same data dir waits its turn,
and takes over when the first stops or dies). Whatever triggers a job, the job's shared
record decides whether it runs (periodic_runs.py), so a scheduler here beside RQ's cron, or a
second machine's, never runs a job twice at once or twice in an interval.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta

from flask import Flask

from omniroute.core.clock import to_iso
from omniroute.jobs.periodic.runs import DUE_SLACK, PeriodicRuns

log = logging.getLogger(__name__)

LOCK_FILE = "scheduler.lock"
MAX_TICK_SECONDS = 30.0


class Scheduler:
    def __init__(
        self,
        app: Flask,
        runs: PeriodicRuns,
        jobs: Sequence[tuple[str, float]],
        run: Callable[[str], object],
        lock_dir: str,
        not_at_start: Collection[str] = (),
    ) -> None:
        """`jobs` are (id, interval in seconds); `run(id)` runs one (it claims the record).
        A job of `not_at_start` that never ran waits one interval from this scheduler's
        making (the start does its work already)."""
        self._app = app
        self._not_at_start = frozenset(not_at_start)
        self._made = runs.clock()
        self._runs = runs
        self._jobs = tuple(jobs)
        self._run = run
        self._lock_path = os.path.join(lock_dir, LOCK_FILE)
        self._lock_fd: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        shortest = min((interval for _, interval in self._jobs), default=MAX_TICK_SECONDS)
        self.tick = max(0.5, min(MAX_TICK_SECONDS, shortest / 2))

    @property
    def job_ids(self) -> tuple[str, ...]:
        return tuple(job_id for job_id, _ in self._jobs)

    @property
    def holds_lock(self) -> bool:
        return self._lock_fd is not None

    def start(self) -> None:
        if not self._jobs:
            return
        self._thread = threading.Thread(target=self._loop, name="omniroute-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._release()

    def due(self, now: datetime) -> list[str]:
        """The jobs whose record says they are due and free (a read: claiming is the run's)."""
        records = self._runs.all()
        started_now = to_iso(now)
        due = []
        for job_id, interval in self._jobs:
            record = records.get(job_id) or {}
            lease = record.get("lease_until")
            if lease is not None and lease > started_now:
                continue
            cutoff = to_iso(now - timedelta(seconds=interval * (1 - DUE_SLACK)))
            started = record.get("started_at")
            if started is None and job_id in self._not_at_start:
                started = to_iso(self._made)
            if started is None or started <= cutoff:
                due.append(job_id)
        return due

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self._acquire():
                    with self._app.app_context():
                        for job_id in self.due(self._runs.clock()):
                            if self._stop.is_set():
                                break
                            self._run_one(job_id)
            except Exception:
                log.exception("the scheduler's tick failed; trying again in %g s", self.tick)
            self._stop.wait(self.tick)

    def _run_one(self, job_id: str) -> None:
        try:
            self._run(job_id)
        except Exception:
            log.exception("periodic job %s failed; it is due again next interval", job_id)

    def _acquire(self) -> bool:
        if self._lock_fd is not None:
            return True
        os.makedirs(os.path.dirname(self._lock_path), exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._lock_fd = fd
        log.info("this process runs the periodic jobs %s (lock %s)", self.job_ids, self._lock_path)
        return True

    def _release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the file lets go of the lock
            self._lock_fd = None
