"""RQ jobs: the queues, and the requests that put work on them.

The job functions (jobs.memory) are named here by dotted path and never imported: they need
the app's services, and the services are built with these requests (Redash's layering: the
core takes "request a backfill" as a callback, jobs/ owns enqueueing). Jobs take ids and plain
values, never objects.
"""

from __future__ import annotations

from omniroute.memory.outbox import ExtractionOutbox
from omniroute.queue import JobQueue

# Queue names, in the order a worker serves them.
EXTRACTION_QUEUE = "extraction"
EMBEDDINGS_QUEUE = "embeddings"
DEFAULT_QUEUE = "default"
QUEUES = (EXTRACTION_QUEUE, EMBEDDINGS_QUEUE, DEFAULT_QUEUE)
# Fixed ids: many requests for the same work fold into one waiting run.
BACKFILL_JOB_ID = "memory-vector-backfill"
STATIC_MODEL_JOB_ID = "build-static-model"

EXTRACT_FACTS = "jobs.memory.extract_facts"
BACKFILL_VECTORS = "jobs.memory.backfill_vectors"
BUILD_STATIC_MODEL = "jobs.memory.build_static_model"


def request_extraction(queue: JobQueue, entry_id: str) -> None:
    """Extract the facts of one outbox row in the background (folded while one waits)."""
    queue.enqueue(EXTRACTION_QUEUE, EXTRACT_FACTS, entry_id, unique_id=f"extract-{entry_id}")


def request_extraction_of_text(
    queue: JobQueue, api_key_id: str, session_id: str, text: str, source: str
) -> None:
    """Extract a text that has no outbox row (the row could not be written): the job is its
    only record, as every extraction was before the outbox."""
    queue.enqueue(EXTRACTION_QUEUE, EXTRACT_FACTS, api_key_id, session_id, text, source)


def requeue_stale_extractions(queue: JobQueue, outbox: ExtractionOutbox) -> int:
    """Queue again the outbox rows whose job seems lost; return how many (the sweep)."""
    stale = outbox.stale()
    for entry_id in stale:
        request_extraction(queue, entry_id)
    return len(stale)


def request_backfill(queue: JobQueue) -> None:
    """Embed the memories that need a vector in the background (folded if one already waits)."""
    queue.enqueue(EMBEDDINGS_QUEUE, BACKFILL_VECTORS, unique_id=BACKFILL_JOB_ID)


def request_static_model(queue: JobQueue) -> None:
    """Build the default static model in the background, then backfill with it."""
    queue.enqueue(EMBEDDINGS_QUEUE, BUILD_STATIC_MODEL, unique_id=STATIC_MODEL_JOB_ID)
