"""RQ jobs: the queues, and the requests that put work on them.

The job functions (jobs.tasks) are named here by dotted path, once each, and never imported:
they need the app's services, and the services are built with these requests (Redash's
layering: the core takes "request a backfill" as a callback, jobs/ owns enqueueing);
tests/test_layers.py resolves every such path to a function. Jobs take ids and plain values,
never objects.
"""

from __future__ import annotations

from omniroute.jobs.queue import JobQueue
from omniroute.memory.extraction.outbox import ExtractionOutbox
from omniroute.memory.qdrant.config import QdrantSettings
from omniroute.memory.qdrant.tier import QdrantTier

# Queue names, in the order a worker serves them.
EXTRACTION_QUEUE = "extraction"
EMBEDDINGS_QUEUE = "embeddings"
DEFAULT_QUEUE = "default"
QUEUES = (EXTRACTION_QUEUE, EMBEDDINGS_QUEUE, DEFAULT_QUEUE)
# Fixed ids: many requests for the same work fold into one waiting run.
BACKFILL_JOB_ID = "memory-vector-backfill"
QDRANT_SYNC_JOB_ID = "qdrant-sync"

EXTRACT_FACTS = "omniroute.jobs.tasks.extract_facts"
BACKFILL_VECTORS = "omniroute.jobs.tasks.backfill_vectors"
BUILD_MODEL = "omniroute.jobs.tasks.build_model"
SYNC_QDRANT = "omniroute.jobs.tasks.sync_qdrant"


def request_extraction(queue: JobQueue, entry_id: str) -> None:
    """Extract the facts of one outbox row in the background (folded while one waits)."""
    queue.enqueue(EXTRACTION_QUEUE, EXTRACT_FACTS, entry_id, unique_id=f"extract-{entry_id}")


def request_extraction_of_text(
    queue: JobQueue, api_key_id: str, session_id: str, text: str, source: str, user_id: str = ""
) -> None:
    """Extract a text that has no outbox row (the row could not be written): the job is its
    only record, as every extraction was before the outbox."""
    queue.enqueue(EXTRACTION_QUEUE, EXTRACT_FACTS, api_key_id, session_id, text, source, user_id)


def requeue_stale_extractions(queue: JobQueue, outbox: ExtractionOutbox) -> int:
    """Queue again the outbox rows whose job seems lost; return how many (the sweep)."""
    stale = outbox.stale()
    for entry_id in stale:
        request_extraction(queue, entry_id)
    return len(stale)


def sweep_outboxes(queue: JobQueue, outbox: ExtractionOutbox, qdrant: QdrantTier) -> dict:
    """The outbox sweep: lost extractions queued again, and memories Qdrant has yet to take
    sent on while it answers (a run that gave up leaves them marked: this repairs them)."""
    requeued = requeue_stale_extractions(queue, outbox)
    settings = qdrant.sync.settings
    pending = settings.enabled() and qdrant.sync.outbox.stats()["pending"]
    sync = bool(pending) and qdrant.health().ok
    if sync:
        request_qdrant_sync(queue, settings)
    return {"extractionsRequeued": requeued, "qdrantPending": pending or 0, "qdrantSync": sync}


def request_qdrant_sync(queue: JobQueue, settings: QdrantSettings) -> None:
    """Make Qdrant match the store in the background (folded if one already waits); in this
    process when Qdrant is in local mode, whose folder no worker may open."""
    queue.enqueue(
        EMBEDDINGS_QUEUE,
        SYNC_QDRANT,
        unique_id=QDRANT_SYNC_JOB_ID,
        in_process=settings.local_mode,
    )


def request_backfill(queue: JobQueue, limit: int | None = None) -> None:
    """Embed the memories that need a vector in the background (folded if one already
    waits); at most `limit` of them when given (the reindex endpoint's)."""
    if limit is None:
        queue.enqueue(EMBEDDINGS_QUEUE, BACKFILL_VECTORS, unique_id=BACKFILL_JOB_ID)
    else:
        queue.enqueue(
            EMBEDDINGS_QUEUE, BACKFILL_VECTORS, limit, unique_id=f"{BACKFILL_JOB_ID}-{limit}"
        )


def request_model_build(queue: JobQueue, kind: str) -> None:
    """Build a local source's model (static, multilingual) in the background, then backfill
    with it."""
    queue.enqueue(EMBEDDINGS_QUEUE, BUILD_MODEL, kind, unique_id=f"build-{kind}-model")
