"""`run_job(runs, config, job_id)`: what every trigger of a periodic job comes to (RQ's cron
through a worker and `flask jobs run` by way of `tasks.run_periodic`, the in-process
scheduler directly). It knows the schedule and the shared record, not the services, so that
the services can hand it to their scheduler without an import circle."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rq.utils import import_attribute

from omniroute.core.metrics import JOBS
from omniroute.jobs.periodic.runs import Claim, PeriodicRuns
from omniroute.jobs.periodic.schedule import BY_ID

log = logging.getLogger(__name__)


def run_job(
    runs: PeriodicRuns, config: Mapping[str, Any], job_id: str, force: bool = False
) -> dict[str, Any]:
    """Run one periodic job if its shared record lets us (due, and nobody runs it); return
    its figures, or `{"skipped": why}`. `force` runs it even when it is not due."""
    job = BY_ID[job_id]
    claim = runs.claim(
        job_id,
        interval=job.interval(config),
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
