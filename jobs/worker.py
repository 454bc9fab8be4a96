"""The RQ worker entry: `flask --app app worker` (Procfile's `worker`)."""

from __future__ import annotations

import click
from flask import Flask
from rq import Worker

from omniroute.services import services

from . import QUEUES


def run_worker(app: Flask, *, burst: bool = False) -> None:
    """Serve the job queues inside an app context, so jobs reach the app's services."""
    with app.app_context():
        connection = services().redis
        if connection is None:
            raise click.UsageError(
                "REDIS_URL is not set: without Redis, jobs run inside the web process "
                "and no worker is needed."
            )
        worker = Worker(list(QUEUES), connection=connection)
        worker.work(burst=burst, logging_level=app.config["LOG_LEVEL"], with_scheduler=True)
