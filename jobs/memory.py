"""Memory jobs: fact extraction after a chat."""

from __future__ import annotations

import logging

from rq import get_current_job

from omniroute.memory.extraction import store_facts
from omniroute.services import services

log = logging.getLogger(__name__)


def extract_facts(api_key_id: str, session_id: str, text: str, source: str) -> int:
    """Store the facts found in `text` as memories of `api_key_id`; return how many."""
    ids = store_facts(
        services().memories,
        api_key_id=api_key_id,
        session_id=session_id,
        text=text,
        source=source,
    )
    job = get_current_job()
    log.info("job %s: %d facts from %s", job.id if job else "in-process", len(ids), source)
    return len(ids)
