"""RQ's cron configuration: `rq cron omniroute.jobs.cron` (the Procfile's `clock` process).

It enqueues every periodic job on the default queue at its interval (read from the same
environment settings as the app); a worker runs it. Two clock processes at once are safe:
the job's shared record lets one run an interval through and makes the other a skip.
"""

from rq import cron

from omniroute.core.config import load_settings
from omniroute.jobs import DEFAULT_QUEUE
from omniroute.jobs.periodic.schedule import PERIODIC_JOBS
from omniroute.jobs.periodic.tasks import run_periodic

_settings = load_settings()
for _job in PERIODIC_JOBS:
    cron.register(
        run_periodic,
        DEFAULT_QUEUE,
        args=(_job.id,),
        interval=_job.interval(_settings),
        job_timeout=_job.lease_seconds,
        # A run still waiting when the next is enqueued (no worker is up) is dropped, so
        # a day without a worker leaves one waiting run of each job, not hundreds.
        ttl=_job.interval(_settings),
        name=_job.id,
    )
