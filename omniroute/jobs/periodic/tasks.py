"""The periodic jobs' tasks (declared in schedule.py, run by runner.py), and `run_periodic`,
the job RQ's cron enqueues and `flask jobs run` and POST /api/jobs/{id}/run call."""

from __future__ import annotations

from typing import Any

from flask import current_app

from omniroute.jobs import sweep_outboxes
from omniroute.jobs.periodic.runner import run_job
from omniroute.services import services


def run_periodic(job_id: str, force: bool = False) -> dict[str, Any]:
    """Run one periodic job with this app's services (see runner.run_job)."""
    return run_job(services().periodic_runs, current_app.config, job_id, force)


def sweep_outboxes_now() -> dict[str, Any]:
    svc = services()
    return sweep_outboxes(svc.jobs, svc.outbox, svc.qdrant)


def check_backends() -> dict[str, Any]:
    return services().backends.check()


def sweep_memories() -> dict[str, Any]:
    return services().retention_sweep.run().as_dict()


def summarize_memories() -> dict[str, Any]:
    return services().summarizer.auto()
