"""The memory life cycle over REST: summarising, compacting to a budget, the periodic jobs.

(Bulk clearing is DELETE /api/memory, beside the list it clears: api/memories.py.)
"""

from __future__ import annotations

import logging

from flask.views import MethodView
from flask_smorest import Blueprint, abort

from omniroute.api.keys import ErasedSchema
from omniroute.api.life_schemas import (
    CompactResultSchema,
    CompactSchema,
    EraseUserSchema,
    PeriodicJobRunSchema,
    PeriodicJobsSchema,
    SummarizeSchema,
    SummaryResultSchema,
)
from omniroute.core.errors import abort_unknown
from omniroute.jobs.periodic.schedule import BY_ID
from omniroute.jobs.periodic.tasks import run_periodic
from omniroute.memory.life.erase import erase_owner
from omniroute.memory.listing import count_live
from omniroute.memory.model import MemoryFilter
from omniroute.services import services

log = logging.getLogger(__name__)
blp = Blueprint("life", __name__, url_prefix="/api", description="Memory life cycle")


@blp.route("/memory/erase")
class EraseUser(MethodView):
    @blp.arguments(EraseUserSchema)
    @blp.response(200, ErasedSchema)
    def post(self, body):
        """Forget one end user of a key

        Every memory of that user of the key goes, with its vectors, keyword rows, Qdrant
        points (queued), history and the chat texts waiting for extraction; the database is
        scrubbed after (as a key's erase: DELETE /api/keys/{id}?erase=true). The key's
        shared memories and its other users' stay. Answers what went, by kind.
        """
        svc = services()
        if svc.keys.get(body["apiKeyId"]) is None and not _has_memories(body["apiKeyId"]):
            abort_unknown("apiKeyId", "No API key has this id, and no memory names it.")
        return erase_owner(svc.memories, body["apiKeyId"], body["userId"]).as_dict()


def _has_memories(api_key_id: str) -> bool:
    return count_live(services().memories, MemoryFilter(api_key_id=api_key_id)) > 0


@blp.route("/memory/summarize")
class Summarize(MethodView):
    @blp.arguments(SummarizeSchema, required=False)
    @blp.response(200, SummaryResultSchema)
    def post(self, body):
        """Fold memories older than some days into summaries

        Each key's memories created more than `olderThanDays` ago become `semantic` summary
        memories of that key (one per about 1000 tokens of lines; never mixing keys), and
        the originals are deleted, their text kept in their history (reason `summarized`)
        and their ids in the summary's metadata. The text is extractive (each memory's
        first sentence) unless the `summarizeProviderModel` setting names a chat model; its
        failure falls back to the extractive text (`writer.fallbackReason`). `dryRun` shows
        the candidates and the tokens it would save, and changes nothing.
        """
        run = services().summarizer.older_than(
            days=body["olderThanDays"],
            api_key_id=body.get("apiKeyId"),
            session_id=body.get("sessionId"),
            dry_run=body["dryRun"],
        )
        return run.as_dict()


@blp.route("/memory/compact")
class Compact(MethodView):
    @blp.arguments(CompactSchema)
    @blp.response(200, CompactResultSchema)
    def post(self, body):
        """Fit a key's memories into a token budget

        While the key's (and session's) memories hold more than `maxTokens`, the oldest is
        compacted in place to its first three sentences: an edit like any other (its old
        text in history, reason `compacted`; re-embedded; caches dropped). Summaries are
        left whole. `fits` says whether the budget was reached.
        """
        run = services().summarizer.to_budget(
            api_key_id=body["apiKeyId"],
            session_id=body.get("sessionId"),
            max_tokens=body["maxTokens"],
            dry_run=body["dryRun"],
        )
        return run.as_dict()


@blp.route("/jobs")
class PeriodicJobs(MethodView):
    @blp.response(200, PeriodicJobsSchema)
    def get(self):
        """List the periodic jobs

        Each with its interval and its last run: status, result or error, duration. A job
        not started for two intervals, or never though it runs at start, is `overdue`:
        nothing triggers it.
        """
        return services().periodic_report()


@blp.route("/jobs/<job_id>/run")
class RunPeriodicJob(MethodView):
    @blp.response(200, PeriodicJobRunSchema)
    def post(self, job_id):
        """Run a periodic job now

        Here and now, even when it is not due, but never beside another run of it: then
        `skipped` says who holds it and nothing runs. A failure is recorded on the job
        (`status`, `error`), as any run's is.
        """
        if job_id not in BY_ID:
            abort(404, message=f"No periodic job {job_id!r}.")
        skipped = None
        try:
            outcome = run_periodic(job_id, force=True)
            skipped = outcome.get("skipped") if isinstance(outcome, dict) else None
        except Exception:
            log.exception("periodic job %s, run from the API, failed", job_id)
        report = services().periodic_report()
        record = next(job for job in report["jobs"] if job["id"] == job_id)
        return {**record, "skipped": skipped}
