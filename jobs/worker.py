"""The RQ worker entry: `flask --app app worker` (Procfile's `worker`)."""

from __future__ import annotations

import click
import redis
from flask import Flask
from rq.worker import HerokuWorker

from . import QUEUES


class GatewayWorker(HerokuWorker):
    """RQ's HerokuWorker that registers again when Redis lost its record of it.

    A Redis restart (or a flush) loses the worker registry while the worker reconnects and
    goes on working, so engine-status said "no worker is running" about a working worker.
    Its heartbeat is its health probe: an idle heartbeat that finds no record writes it anew
    (RQ sends one as soon as Redis answers again, and after every job).
    """

    def heartbeat(self, timeout=None, pipeline=None):
        if pipeline is None and not self.connection.exists(self.key):
            self.log.info("Worker %s: Redis lost the worker's record; registering again", self.name)
            self.register_birth()
            return
        super().heartbeat(timeout, pipeline)


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
    if app.config["QDRANT_PATH"]:
        raise click.UsageError(
            f"QDRANT_PATH={app.config['QDRANT_PATH']} is Qdrant's local mode, whose folder one "
            "process at a time may open: the web process keeps it and runs Qdrant's jobs "
            "itself. A separate worker needs a Qdrant server (QDRANT_URL) instead."
        )
    connection = worker_connection(app.config["REDIS_URL"])
    with app.app_context():
        # On SIGTERM (a platform's restart or deploy) the current job is stopped within 6 s
        # and fails into its retries, well inside the 30 s before SIGKILL: it runs again.
        worker = GatewayWorker(list(QUEUES), connection=connection)
        worker.work(burst=burst, logging_level=app.config["LOG_LEVEL"], with_scheduler=True)
    connection.close()
