"""What many test modules share: constants, a clock, waiting for background work, processes.

Fixtures live in conftest.py; plain helpers live here, so that no test imports conftest.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio

from omniroute.core.clock import to_iso
from omniroute.core.config import SETTINGS
from omniroute.core.db.tables import memories

ADMIN_TOKEN = "test-admin-token"
# The Redis database the job tests own, flushed before and after each of them: one per
# pytest-xdist worker (gw0 has 15, gw1 14, ...), so parallel workers never flush each other's.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
REDIS_TEST_URL = f"redis://127.0.0.1:6379/{15 - _WORKER}"


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self.moment = start or datetime(2026, 1, 15, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.moment

    def advance(self, **delta) -> None:
        self.moment += timedelta(**delta)


def app_settings(tmp_path, database_url: str | None, **more) -> dict:
    """An app's settings: DATA_DIR in tmp_path, the test's database, the admin token."""
    config = {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN, **more}
    if database_url:
        config["DATABASE_URL"] = database_url
    return config


def in_minutes(clock: FakeClock, minutes: int) -> str:
    """The ISO time `minutes` after the clock's now (the clock stays where it is)."""
    return to_iso(clock() + timedelta(minutes=minutes))


def history(store, memory_id: str) -> list[tuple]:
    """A memory's audit rows as (action, old content, new content, old type, new type)."""
    return [
        (row["action"], row["old_content"], row["new_content"], row["old_type"], row["new_type"])
        for row in store.history(memory_id)
    ]


def eventually(condition, timeout: float = 10.0, interval: float = 0.02):
    """Wait until `condition()` is truthy (background jobs); return its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def drained(svc, timeout: float = 30.0) -> None:
    """Wait until every in-process job submitted so far has run (extraction included).

    A test that asserts nothing was extracted must wait for this first: after a fixed sleep
    it would pass whenever the job was merely slow. A job may queue another as it ends (an
    extraction, the backfill of what it stored): those are waited for too.
    """
    deadline = time.monotonic() + timeout
    while svc.jobs.busy() and time.monotonic() < deadline:
        svc.jobs.wait(deadline - time.monotonic())
    assert not svc.jobs.busy(), f"jobs still running after {timeout} s"


def csrf_of(html: str) -> str:
    """The CSRF token a studio page carries (login form field or meta tag)."""
    match = re.search(r'(?:name="csrf_token" value|name="csrf-token" content)="([^"]+)"', html)
    assert match, "no CSRF token on the page"
    return match.group(1)


def environment(**overrides: str) -> dict[str, str]:
    """This process's environment without any setting of ours, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if k not in {s.name for s in SETTINGS}}
    env.update(overrides)
    return env


def stop(*processes: subprocess.Popen, timeout: float = 30) -> bool:
    """SIGTERM, as a platform stops a dyno, then SIGKILL whatever is still up after `timeout`:
    no process outlives its test (a worker that did took later tests' jobs). True when every
    process ended on its SIGTERM."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
    deadline = time.monotonic() + timeout
    in_time = True
    for process in processes:
        try:
            process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            in_time = False
            process.kill()
            process.wait(timeout=10)
    return in_time


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def backdate(store, key, days, accessed_days=None, count=0):
    """Backdate a memory: created `days` ago, injected `accessed_days` ago `count` times."""
    now = store.clock()
    values = {"created_at": to_iso(now - timedelta(days=days)), "access_count": count}
    if accessed_days is not None:
        values["last_accessed_at"] = to_iso(now - timedelta(days=accessed_days))
    with store.db.write() as conn:
        conn.execute(memories.update().where(memories.c.key == key).values(**values))


def run_async(work, *args):
    """Run an async test body to its end, on an event loop of its own in a thread of its
    own: the session's browser (sync Playwright) may keep a loop running in the main thread
    of this pytest worker, beside which asyncio.run and anyio.run refuse to start."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(anyio.run, work, *args).result()


def place_built_model(place: Path, built: Path) -> None:
    """A model built once a run (a session fixture's), where a build on this app's disk
    would leave it."""
    place.parent.mkdir(parents=True, exist_ok=True)
    place.symlink_to(built, target_is_directory=True)
