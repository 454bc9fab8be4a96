"""Job functions for the queue tests; module-level so that an RQ worker can import them."""

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
