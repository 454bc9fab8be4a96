"""The memory pipeline self-check behind GET /api/memory/health.

It writes a test memory, finds it by listing and by keyword search, and deletes it, all
inside one transaction that is always rolled back: nothing of it (rows, history, index
entries) outlives the check, even if the process dies halfway.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from omniroute.memory.listing import list_page
from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.fts import keyword_search
from omniroute.memory.store import MemoryStore

HEALTH_CHECK_OWNER = "health-check"
TEST_CONTENT = "pipeline verification test"


@dataclass(frozen=True)
class VerifyResult:
    working: bool
    latency_ms: int
    error: str | None = None


def verify_pipeline(store: MemoryStore) -> VerifyResult:
    started = time.perf_counter()
    stage = ["writing"]
    try:
        _round_trip(store, stage)
    except Exception as exc:
        error = f"{stage[0]} failed: {type(exc).__name__}: {exc}"
        return VerifyResult(False, _elapsed_ms(started), error)
    return VerifyResult(True, _elapsed_ms(started))


def _round_trip(store: MemoryStore, stage: list[str]) -> None:
    """Each step names itself in `stage` first, so a failure says where it happened."""
    key = f"__extraction_test__{uuid.uuid4().hex}"
    with store.db.scratch() as conn:
        memory, _ = store.create(
            api_key_id=HEALTH_CHECK_OWNER, key=key, content=TEST_CONTENT, connection=conn
        )
        stage[0] = "listing"
        page = list_page(
            store, MemoryFilter(api_key_id=HEALTH_CHECK_OWNER), limit=100, connection=conn
        )
        if memory.id not in {m.id for m in page.data}:
            raise RuntimeError("the test memory was written but not listed")
        stage[0] = "keyword search"
        found = keyword_search(
            conn, owners=(HEALTH_CHECK_OWNER,), query=TEST_CONTENT, now_iso=store.now()
        )
        if memory.id not in {m.id for m, _ in found}:
            raise RuntimeError("the test memory was written but not found")
        stage[0] = "deleting"
        if not store.delete(memory.id, connection=conn):
            raise RuntimeError("the test memory could not be deleted")


def _elapsed_ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
