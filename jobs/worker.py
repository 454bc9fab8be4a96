"""The RQ worker entry: `flask --app app worker` (Procfile's `worker`)."""

from __future__ import annotations

import click
import redis
from flask import Flask
from rq.worker import HerokuWorker

from . import QUEUES


def worker_connection(url: str) -> redis.Redis:
    """A Redis client of the worker's own, not the web's pooled one.

    RQ blocks on Redis for minutes between jobs and sets its socket timeout to suit, but only
    on connections its pool has yet to open: a connection the app opened earlier (with the
    web's 5 s timeout) made an idle worker quit after 5 s.
    """
    return redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30)


def run_worker(app: Flask, *, burst: bool = False) -> None:
    """Serve the job queues inside an app context, so jobs reach the app's services."""
    if not app.config["REDIS_URL"]:
        raise click.UsageError(
            "REDIS_URL is not set: without Redis, jobs run inside the web process "
            "and no worker is needed."
        )
    connection = worker_connection(app.config["REDIS_URL"])
    with app.app_context():
        # On SIGTERM (a platform's restart or deploy) the current job is stopped within 6 s
        # and fails into its retries, well inside the 30 s before SIGKILL: it runs again.
        worker = HerokuWorker(list(QUEUES), connection=connection)
        worker.work(burst=burst, logging_level=app.config["LOG_LEVEL"], with_scheduler=True)
    connection.close()
