"""Memory job functions: fact extraction after a chat, vectors for memories that need them,
and the Qdrant dual-write.

RQ (or the in-process pool) imports them by the dotted names in jobs/__init__.py.
"""

from __future__ import annotations

import logging

from flask import current_app
from rq import get_current_job

from omniroute.core.logs import log_event
from omniroute.core.metrics import counted
from omniroute.jobs import request_backfill
from omniroute.memory.embedding.model_builds import BuildInProgress, models_dir
from omniroute.memory.embedding.multilingual_model import MULTILINGUAL_BUILD
from omniroute.memory.embedding.static_model import STATIC_BUILD
from omniroute.services import services

log = logging.getLogger(__name__)
EXTRACTION_FAILED_EVENT = "memory.extraction.background.failed"  # the specification's event


@counted("extract-facts")
def extract_facts(entry_id: str, *text_job: str) -> int:
    """Store the facts of one extraction outbox row, and delete the row; return how many.

    A job queued before the outbox (or when its row could not be written) carries the text
    itself: (api_key_id, session_id, text, source[, user_id]) (one queued before end users
    has no user_id).
    """
    svc = services()
    try:
        if text_job:
            session_id, text, source, *user = text_job
            count = svc.outbox.store_text(entry_id, session_id, text, source, *user)
        else:
            count = svc.outbox.process(entry_id) or 0
    except Exception as exc:  # logged as the specification names it; the job's retry follows
        log_event(log, EXTRACTION_FAILED_EVENT, logging.WARNING, entry=entry_id, error=repr(exc))
        raise
    job = get_current_job()
    log.info("job %s: %d facts", job.id if job else "in-process", count)
    svc.activity.add("extractions")
    svc.activity.add("facts", count)
    if job is not None:
        # An RQ work horse exits when the job returns; in-process, the batch's timer writes
        # (a flush per job would be a write transaction per chat turn beside the requests).
        svc.activity.flush()
    return count


@counted("backfill-vectors")
def backfill_vectors(limit: int | None = None) -> int:
    """Embed every memory that still needs a vector (at most `limit`); return how many got
    one."""
    progress = services().backfill.run(limit=limit)
    _report(
        f"{progress.processed} memories embedded, {progress.errors} errors",
        progress.processed or progress.errors,
        progress.reason,
    )
    return progress.processed


@counted("sync-qdrant")
def sync_qdrant() -> int:
    """Write to Qdrant what the outbox holds (a backfill too); return the points changed.

    A failure raises (SyncStopped), so the job is retried; the rows stay marked either way."""
    progress = services().qdrant.sync.run()
    _report(
        f"Qdrant {progress.upserted} points written, {progress.deleted} deleted",
        progress.upserted or progress.deleted,
        progress.reason,
    )
    return progress.upserted + progress.deleted


def _report(summary: str, news: int, reason: str | None) -> None:
    """Log what a job did; a run that had nothing to do is no news at INFO."""
    job = get_current_job()
    log.log(
        logging.INFO if news else logging.DEBUG,
        "job %s: %s%s",
        job.id if job else "in-process",
        summary,
        f" ({reason})" if reason else "",
    )


BUILDS = {build.kind: build for build in (STATIC_BUILD, MULTILINGUAL_BUILD)}


@counted("build-model")
def build_model(kind: str) -> str | None:
    """Build a local source's model (static, multilingual), keep it in the database for every
    process, then embed the memories with it. A model another process built is restored
    instead."""
    svc = services()
    build = BUILDS[kind]
    folder = models_dir(current_app.config)
    target = build.path(folder)
    if svc.shared_models.restore(target):
        log.info("%s embedding model restored from the database into %s", kind, target)
    else:
        try:
            build.build(folder)
        except BuildInProgress as exc:
            log.info("%s model: %s; leaving it to that build", kind, exc)
            return None
        svc.shared_models.publish(target)
        log.info("%s embedding model built into %s and kept in the database", kind, target)
    request_backfill(svc.jobs)
    return str(target)
