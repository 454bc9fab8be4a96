"""Job functions for the queue tests; module-level so that an RQ worker can import them."""

import os
import time
from pathlib import Path

CALLS: list[str] = []


def always_fails(label: str) -> None:
    CALLS.append(label)
    raise RuntimeError(f"job {label} fails on purpose")


def fails_twice(label: str) -> None:
    CALLS.append(label)
    if CALLS.count(label) <= 2:
        raise RuntimeError("not yet")


def sleeps(seconds: float) -> None:
    """A job that runs long enough to be caught by a shutdown."""
    time.sleep(seconds)


def asks_for_another(marker: str) -> None:
    """From inside its job, asks for a follow-up job (as extraction asks for a backfill)."""
    from omniroute.services import services

    services().jobs.enqueue("default", "tests.job_functions.leaves_a_mark", marker)


def leaves_a_mark(marker: str) -> None:
    Path(marker).write_text("ran")


def runs_until_released(folder: str) -> None:
    """Notes its start (and its process) in `folder`, waits for a `release` file there, then
    notes its end."""
    here = Path(folder)
    with (here / "runs").open("a") as runs:
        runs.write(f"started {os.getpid()}\n")
    while not (here / "release").exists():
        time.sleep(0.05)
    with (here / "runs").open("a") as runs:
        runs.write("done\n")
