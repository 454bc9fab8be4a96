"""`flask memory import FILE`: a large import in one command, with progress, then its vectors.

The items go through POST /api/memory/import (this app's own handler, in process), so each is
checked, upserted and reported exactly as the REST import does it; the command cuts the file
into requests under the body limit, counts as it goes, and then embeds what it wrote, so the
memories are searchable by meaning when it returns (the backfill of a running web process
or worker would do the same, later).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from typing import IO, Any

import click
from flask import current_app

from omniroute.services import services

# Bytes of JSON a request carries at most: under MAX_BODY_BYTES's default (1 MiB).
REQUEST_BYTES = 768 * 1024
EMBED_BATCH = 1024  # memories embedded and written at a time
SHOWN_FAILURES = 10


def items_of(source: IO[str]) -> Iterator[tuple[int, Any]]:
    """(line number, item) of a JSON Lines file, or (position, item) of an export file: one
    JSON document whose `memories` are the items."""
    first = source.readline()
    try:
        head = json.loads(first) if first.strip() else None
    except json.JSONDecodeError:  # not a whole line of JSON: one document over many lines
        whole = _loaded("1", first + source.read())
        memories = whole.get("memories") if isinstance(whole, dict) else None
        if not isinstance(memories, list):
            raise click.ClickException("the file is neither JSON Lines nor an export") from None
        yield from enumerate(memories, start=1)
        return
    if head is not None:
        yield 1, head
    for number, line in enumerate(source, start=2):
        if line.strip():
            yield number, _loaded(str(number), line)


def _loaded(where: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"line {where} is not JSON: {exc.msg}") from None


def requests_of(items: Iterator[tuple[int, Any]]) -> Iterator[list[tuple[int, Any]]]:
    """The items cut into requests of at most REQUEST_BYTES of JSON each."""
    batch: list[tuple[int, Any]] = []
    size = 0
    for number, item in items:
        length = len(json.dumps(item, ensure_ascii=False).encode()) + 2
        if batch and size + length > REQUEST_BYTES:
            yield batch
            batch, size = [], 0
        batch.append((number, item))
        size += length
    if batch:
        yield batch


@click.command("import")
@click.argument("source", type=click.File("r", encoding="utf-8"))
@click.option("--api-key-id", help="Put every memory in this key (else each item's apiKeyId).")
@click.option("--no-vectors", is_flag=True, help="Leave the embedding to the backfill.")
def import_command(source: IO[str], api_key_id: str | None, no_vectors: bool) -> None:
    """Import memories from FILE: JSON Lines (one POST /api/memory/import item a line) or an
    export of GET /api/memory/export; then embed them. Prints progress; exits 1 when any
    item failed (each failure is named by its line)."""
    client = current_app.test_client()
    headers = {"Authorization": f"Bearer {current_app.config['OMNIROUTE_ADMIN_TOKEN']}"}
    counts = {"created": 0, "updated": 0, "failed": 0}
    failures: list[str] = []
    started = time.monotonic()
    with services().memories.quiet():
        _import(client, headers, source, api_key_id, counts, failures, started)
    for failure in failures[:SHOWN_FAILURES]:
        click.echo(failure, err=True)
    if len(failures) > SHOWN_FAILURES:
        click.echo(f"... and {len(failures) - SHOWN_FAILURES:,} more failures", err=True)
    if no_vectors:
        services().memories.notify_write()  # the backfill embeds them
    else:
        embed_pending()
    click.echo(json.dumps({**counts, "seconds": round(time.monotonic() - started, 1)}))
    if failures:
        sys.exit(1)


def _import(client, headers, source, api_key_id, counts, failures, started) -> None:
    """Post the file's requests one after another, adding up `counts` and `failures`."""
    for batch in requests_of(items_of(source)):
        body: dict[str, Any] = {"memories": [item for _, item in batch]}
        if api_key_id:
            body["apiKeyId"] = api_key_id
        response = client.post("/api/memory/import", json=body, headers=headers)
        if response.status_code != 200:
            raise click.ClickException(
                f"lines {batch[0][0]}-{batch[-1][0]} were refused: {response.status_code} "
                f"{response.get_data(as_text=True)[:500]}"
            )
        summary = response.get_json()
        for status in counts:
            counts[status] += summary[status]
        for (number, _), result in zip(batch, summary["results"], strict=True):
            if result["status"] == "failed":
                failures.append(f"line {number}: {result['errors']}")
        done = sum(counts.values())
        rate = done / max(time.monotonic() - started, 1e-9)
        click.echo(
            f"imported {done:,} (created {counts['created']:,}, updated {counts['updated']:,},"
            f" failed {counts['failed']:,}), {rate:,.0f} a second",
            err=True,
        )


def embed_pending() -> None:
    """Embed here until nothing is pending, in large batches, saying how far it got."""
    backfill = services().backfill
    started, pending = time.monotonic(), backfill.pending()
    while True:
        progress = backfill.run(max_batches=16, batch_size=EMBED_BATCH)
        left = backfill.pending()
        if progress.reason or progress.processed == 0 or left == 0:
            break
        rate = (pending - left) / max(time.monotonic() - started, 1e-9)
        click.echo(f"embedded {pending - left:,} of {pending:,}, {rate:,.0f} a second", err=True)
    if left:
        click.echo(f"vectors: {left:,} left for the backfill ({progress.reason})", err=True)
    else:
        click.echo("vectors: every memory is embedded", err=True)
