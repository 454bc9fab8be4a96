"""`run_periodic(job_id)`: what every trigger of a periodic job calls (RQ's cron through a
worker, the in-process scheduler, `flask jobs run`, POST /api/jobs/{id}/run)."""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app
from rq.utils import import_attribute

from omniroute.metrics import JOBS
from omniroute.periodic_runs import Claim
from omniroute.services import services

from .schedule import BY_ID

log = logging.getLogger(__name__)


def run_periodic(job_id: str, force: bool = False) -> dict[str, Any]:
    """Run one periodic job if its shared record lets us (due, and nobody runs it); return
    its figures, or `{"skipped": why}`. `force` runs it even when it is not due."""
    job = BY_ID[job_id]
    runs = services().periodic_runs
    claim = runs.claim(
        job_id,
        interval=job.interval(current_app.config),
        lease_seconds=job.lease_seconds,
        force=force,
    )
    if not isinstance(claim, Claim):
        log.debug("periodic job %s skipped: %s", job_id, claim)
        JOBS.labels(job_id, "skipped").inc()
        return {"skipped": claim}
    try:
        result = import_attribute(job.task)()
    except Exception as exc:
        runs.finish(claim, error=f"{type(exc).__name__}: {exc}")
        JOBS.labels(job_id, "failed").inc()
        raise
    runs.finish(claim, result=result)
    JOBS.labels(job_id, "ok").inc()
    news = any(isinstance(value, int) and value for value in result.values())
    log.log(logging.INFO if news else logging.DEBUG, "periodic job %s: %s", job_id, result)
    return result
