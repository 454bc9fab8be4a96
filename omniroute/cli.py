"""Flask CLI commands: `flask --app app db upgrade`, `flask --app app worker`."""

from __future__ import annotations

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from jobs.worker import run_worker

from . import migrate
from .services import services

db_cli = AppGroup("db", help="Database schema.")


@db_cli.command("upgrade")
def upgrade_command() -> None:
    """Apply pending migrations (the app also applies them whenever it starts)."""
    database = services().db
    applied = migrate.upgrade(database)
    for migration in applied:
        click.echo(f"applied {migration.version:04d}_{migration.name}")
    with database.read() as connection:
        version = max(migrate.applied_versions(connection), default=0)
    click.echo(f"database {database.path} is at version {version}")


@click.command("worker")
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
def worker_command(burst: bool) -> None:
    """Run the RQ worker on the job queues (needs REDIS_URL)."""
    run_worker(current_app._get_current_object(), burst=burst)


def init_app(app: Flask) -> None:
    app.cli.add_command(db_cli)
    app.cli.add_command(worker_command)
