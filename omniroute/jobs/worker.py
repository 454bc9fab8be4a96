"""The RQ worker entry: `flask --app app worker` (Procfile's `worker`)."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import click
import redis
from flask import Flask
from rq.worker import HerokuWorker
from rq.worker_registration import REDIS_WORKER_KEYS

from omniroute.jobs import QUEUES
from omniroute.jobs.queue import JOB_HEARTBEAT_SECONDS, MAINTENANCE_SECONDS, WORKER_TTL

log = logging.getLogger(__name__)

MAX_RECONNECT_WAIT = 16.0
# A platform sends SIGKILL 30 s after SIGTERM; a worker still up this long after its stop
# ends itself first, whatever swallowed RQ's StopRequested.
STOP_DEADLINE_SECONDS = 20.0


class GatewayWorker(HerokuWorker):
    """RQ's HerokuWorker, made to recover within a minute of what RQ takes ten minutes for.

    - Its loop comes round at least every WORKER_TTL - 15 s (RQ's idle wait), it runs RQ's
      maintenance every MAINTENANCE_SECONDS (registries cleaned; RQ's default is 10 minutes),
      and while a job runs it beats every JOB_HEARTBEAT_SECONDS: a worker that stops beating
      is known dead (`worker_alive`) within half a minute.
    - A Redis restart (or a flush) loses the worker's record while the worker reconnects and
      goes on working: its next heartbeat writes the record anew. It asks the registry of
      workers, not whether its key exists: a write retried across the restart (redis-py
      retries a failed command once it reconnects) can leave a key of one field behind.
    - The same restart kills RQ's scheduler process inside the worker (the one that enqueues
      retries at their time); RQ's maintenance starts it again when it is gone, now every
      30 s instead of every 10 minutes.
    - A stop cannot be lost. RQ stops an idle worker by raising StopRequested from its signal
      handler, wherever the main thread is; a broad `except` on the way (in RQ, redis-py or a
      job's teardown) swallowed it once and the worker went on taking jobs after its SIGTERM.
      The stop is now also a flag RQ's loop checks on each round, and a deadline: a worker
      still running STOP_DEADLINE_SECONDS after its stop ends its process.
    """

    stop_deadline = STOP_DEADLINE_SECONDS

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("worker_ttl", WORKER_TTL)
        kwargs.setdefault("maintenance_interval", MAINTENANCE_SECONDS)
        kwargs.setdefault("job_monitoring_interval", JOB_HEARTBEAT_SECONDS)
        super().__init__(*args, **kwargs)

    def request_stop(self, signum, frame):
        if self._shutdown_requested_date is None:
            self._stop_requested = True  # RQ's loop breaks on it if StopRequested goes astray
            deadline = threading.Timer(self.stop_deadline, self._end_a_lost_stop)
            deadline.daemon = True  # a worker that stops in time exits without waiting for it
            deadline.start()
        super().request_stop(signum, frame)

    def kill_horse(self, sig: signal.Signals = signal.SIGKILL) -> None:
        """RQ's, but only ever at a horse: RQ signals `os.getpgid(horse_pid)`, and with no
        horse (pid 0, as a stop-job command or a race may find it) that is this process's own
        group: the worker, and whatever started it in that group (a parallel test run lost
        its whole session this way)."""
        try:
            if not self.horse_pid or os.getpgid(self.horse_pid) == os.getpgrp():
                return
        except ProcessLookupError:  # the horse is already gone
            return
        super().kill_horse(sig)

    def _end_a_lost_stop(self) -> None:
        self.log.error(
            "Worker %s: still running %.0f s after its stop; ending the process",
            self.name,
            self.stop_deadline,
        )
        if self.horse_pid:
            self.kill_horse()
        logging.shutdown()
        os._exit(1)

    def heartbeat(self, timeout=None, pipeline=None):
        if pipeline is None and not self.connection.sismember(REDIS_WORKER_KEYS, self.key):
            self.log.info("Worker %s: Redis lost the worker's record; registering again", self.name)
            self.connection.delete(self.key)  # what a retried write left of it
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
        while True:
            # On SIGTERM (a platform's restart or deploy) the current job is stopped within
            # 6 s and fails into its retries, well inside the 30 s before SIGKILL: it runs again.
            worker = GatewayWorker(list(QUEUES), connection=connection)
            try:
                worker.work(burst=burst, logging_level=app.config["LOG_LEVEL"], with_scheduler=True)
            except redis.RedisError as exc:  # its teardown, when Redis went away
                log.warning("worker %s stopped, Redis unavailable: %s", worker.name, exc)
            if burst or worker._shutdown_requested_date is not None:  # SIGTERM or SIGINT
                break
            # RQ's loop quits on a Redis error outside its wait for jobs (a restart while a
            # job runs, or between two jobs): a new worker takes over once Redis answers.
            # Nothing runs meanwhile, so a SIGTERM may end the process at once.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            _wait_for(connection)
            log.info("worker %s quit on an error; a new worker starts", worker.name)
    connection.close()


def _wait_for(connection: redis.Redis) -> None:
    wait = 1.0
    while True:
        try:
            connection.ping()
            return
        except redis.RedisError as exc:
            log.warning("Redis unavailable (%s); trying again in %.0f s", exc, wait)
            time.sleep(wait)
            wait = min(wait * 2, MAX_RECONNECT_WAIT)
