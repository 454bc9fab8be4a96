"""GET /api/memory/health: the pipeline self-check, and what it reports when broken."""

import pytest

from omniroute.memory.listing import list_page
from omniroute.memory.model import MemoryFilter

pytestmark = pytest.mark.both_stores


def test_health_round_trip_works_and_leaves_nothing_behind(client, admin, svc):
    response = client.get("/api/memory/health", headers=admin)
    assert response.status_code == 200
    assert response.json["working"] is True
    assert response.json["latencyMs"] >= 0
    assert list_page(svc.memories, MemoryFilter()).total == 0
    with svc.db.read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM memory_history").scalar() == 0
        assert conn.exec_driver_sql("SELECT count(*) FROM memories").scalar() == 0


# What breaks keyword search in each dialect (FTS5's insert trigger, the stored tsvector),
# and what mends it: PostgreSQL's database outlives the test.
BREAK_KEYWORD_INDEX = {
    "sqlite": ("DROP TRIGGER memory_fts_after_insert", None),
    "postgresql": (
        "ALTER TABLE memories RENAME COLUMN search_vector TO broken",
        "ALTER TABLE memories RENAME COLUMN broken TO search_vector",
    ),
}


@pytest.fixture
def broken_keyword_index(svc):
    breaking, mending = BREAK_KEYWORD_INDEX[svc.db.dialect]
    with svc.db.write() as conn:
        conn.exec_driver_sql(breaking)
    yield
    if mending:
        with svc.db.write() as conn:
            conn.exec_driver_sql(mending)


def test_health_reports_a_broken_pipeline_with_503(client, admin, broken_keyword_index):
    response = client.get("/api/memory/health", headers=admin)
    assert response.status_code == 503
    assert response.json["working"] is False
    assert response.json["error"]["type"] == "service_unavailable"
    assert "keyword search" in response.json["error"]["message"]
