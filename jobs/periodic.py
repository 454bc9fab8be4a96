"""The periodic jobs' tasks (declared in jobs/schedule.py, run by jobs/runner.py)."""

from __future__ import annotations

from typing import Any

from omniroute.services import services

from . import sweep_outboxes


def sweep_outboxes_now() -> dict[str, Any]:
    svc = services()
    return sweep_outboxes(svc.jobs, svc.outbox, svc.qdrant)


def sweep_memories() -> dict[str, Any]:
    return services().retention_sweep.run().as_dict()


def summarize_memories() -> dict[str, Any]:
    return services().summarizer.auto()
