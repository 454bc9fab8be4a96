"""Flask CLI commands of the memory life cycle: `memory clear`, `jobs list`, `jobs run`."""

from __future__ import annotations

import json
from datetime import datetime

import click
from flask.cli import AppGroup

from omniroute.core.clock import to_iso
from omniroute.jobs.periodic.schedule import BY_ID
from omniroute.jobs.periodic.tasks import run_periodic
from omniroute.memory.life.bulk import clear
from omniroute.memory.model import MEMORY_TYPES, MemoryFilter, user_id_problem
from omniroute.services import services

jobs_cli = AppGroup("jobs", help="The periodic jobs.")


@jobs_cli.command("list")
@click.option("--json", "as_json", is_flag=True, help="The report as JSON (GET /api/jobs).")
def list_command(as_json: bool) -> None:
    """Show each periodic job: its interval, last run and result."""
    report = services().periodic_report()
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"scheduler: {report['scheduler']}")
    for job in report["jobs"]:
        status = job["status"] or "never run"
        flag = "  OVERDUE" if job["overdue"] else ""
        click.echo(f"\n{job['id']}  every {job['intervalSeconds']} s  {status}{flag}")
        if job["lastStartedAt"]:
            click.echo(
                f"  last run {job['lastStartedAt']}, {job['durationMs']} ms; "
                f"{job['runs']} runs, {job['failures']} failed"
            )
        if job["error"]:
            click.echo(f"  error: {job['error']}")
        elif job["result"]:
            click.echo(f"  result: {json.dumps(job['result'])}")


@jobs_cli.command("run")
@click.argument("job_id", type=click.Choice(sorted(BY_ID)))
def run_command(job_id: str) -> None:
    """Run one periodic job here and now (unless another run holds it)."""
    outcome = run_periodic(job_id, force=True)
    if isinstance(outcome, dict) and "skipped" in outcome:
        raise click.ClickException(f"{job_id} did not run: {outcome['skipped']}")
    click.echo(f"{job_id}: {json.dumps(outcome)}")


def _clear_options(command):
    options = (
        click.option("--api-key-id", help="The key whose memories go."),
        click.option("--global", "global_", is_flag=True, help="The global memories (no key)."),
        click.option("--user-id", help="Only this end user's memories of the key."),
        click.option("--type", "memory_type", type=click.Choice(MEMORY_TYPES)),
        click.option("--session-id"),
        click.option(
            "--older-than",
            type=click.DateTime(["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]),
            help="Only memories created before this date (UTC).",
        ),
        click.option("--dry-run", is_flag=True, help="Count them; delete nothing."),
        click.option("--yes", is_flag=True, help="Do not ask for confirmation."),
    )
    for option in reversed(options):
        command = option(command)
    return command


@click.command("clear")
@_clear_options
def clear_command(
    api_key_id: str | None,
    global_: bool,
    user_id: str | None,
    memory_type: str | None,
    session_id: str | None,
    older_than: datetime | None,
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete every memory of one key (or one end user of it, or the global ones) that
    matches (DELETE /api/memory's code path)."""
    if global_ == bool(api_key_id):
        raise click.UsageError("name the key (--api-key-id) or --global, one of them")
    if global_ and user_id is not None:
        raise click.UsageError("global memories belong to no end user: leave out --user-id")
    if user_id is not None and (problem := user_id_problem(user_id)):
        raise click.BadParameter(problem, param_hint="--user-id")
    whose = "the global ones" if global_ else api_key_id
    if user_id is not None:
        whose = f"end user {user_id!r} of {api_key_id}"
    filters = MemoryFilter(
        api_key_id=api_key_id or "",
        user_id=user_id,
        type=memory_type,
        session_id=session_id,
        created_before=to_iso(older_than) if older_than else None,
    )
    store = services().memories
    matched = clear(store, filters, dry_run=True)
    if dry_run or not matched:
        click.echo(f"{matched} memories of {whose} match; nothing deleted")
        return
    if not yes:
        click.confirm(f"Delete {matched} memories of {whose}?", abort=True)
    deleted = clear(store, filters)
    click.echo(f"deleted {deleted} memories of {whose}")
