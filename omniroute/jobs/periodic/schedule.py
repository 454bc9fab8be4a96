"""The periodic jobs, declared in one place (Redash's habit: one list, fixed ids).

Whoever triggers them (RQ's cron in the Procfile's `clock` process, the scheduler thread of
a web process without Redis, `flask jobs run`), a job runs through `runner.run_job`,
which claims the job's shared record first (`runs.py`): it runs at most once
an interval and never twice at once, and its last run and result are there for `flask jobs
list` and the studio's Engine tab. Each task is idempotent and cheap when there is nothing
to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PeriodicJob:
    id: str
    task: str  # dotted path of a function of no arguments that returns a dict of figures
    interval_setting: str  # the environment setting that holds its interval, in seconds
    lease_seconds: int  # longer than any run: a run that died frees the job after this
    description: str
    # Also run by each web process's own thread when jobs go through Redis: the outbox
    # sweep repairs what a lost Redis job left undone, so it must not wait for a clock.
    everywhere: bool = False
    # Its first run waits one interval after the process starts (the start did its work).
    at_start: bool = True

    def interval(self, config: Mapping[str, Any]) -> int:
        return config[self.interval_setting]


PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob(
        "outbox-sweep",
        "omniroute.jobs.periodic.tasks.sweep_outboxes_now",
        "OUTBOX_SWEEP_INTERVAL",
        300,
        "Queue again the chat texts whose extraction job was lost; send Qdrant what it "
        "has yet to take.",
        everywhere=True,
    ),
    PeriodicJob(
        "backend-health",
        "omniroute.jobs.periodic.tasks.check_backends",
        "MEMORY_BACKEND_HEALTH_INTERVAL",
        120,
        "Check the health of every memory backend (the local store and each remote one), "
        "initialising again one that answers again.",
        everywhere=True,
        at_start=False,
    ),
    PeriodicJob(
        "retention-sweep",
        "omniroute.jobs.periodic.tasks.sweep_memories",
        "MEMORY_SWEEP_INTERVAL",
        1800,
        "Delete expired memories, those past retention (retentionSweep) and decayed "
        "episodic ones (typed decay), in short batches.",
    ),
    PeriodicJob(
        "summarize",
        "omniroute.jobs.periodic.tasks.summarize_memories",
        "MEMORY_SUMMARIZE_INTERVAL",
        3600,
        "With autoSummarize: fold each key's aged memories into summaries, then fit each "
        "key into summarizeBudgetTokens.",
    ),
)
BY_ID = {job.id: job for job in PERIODIC_JOBS}
