"""The Engine tab's Qdrant chip and card, rendered by the server (local mode)."""

from __future__ import annotations

import pytest

from omniroute.factory import create_app
from tests.helpers import app_settings
from tests.html_checks import text_of
from tests.qdrant_helpers import enable, synced


@pytest.fixture
def app(tmp_path, static_path):
    app = create_app(
        app_settings(
            tmp_path, None, MEMORY_STATIC_MODEL=str(static_path), QDRANT_PATH=str(tmp_path / "q")
        )
    )
    app.extensions["omniroute"].memory_settings.update(
        {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
    )
    yield app
    app.extensions["omniroute"].close()


@pytest.fixture
def svc(app):
    return app.extensions["omniroute"]


def test_the_card_shows_qdrant_off_and_its_local_mode(studio):
    page = studio.get("/dashboard/memory?tab=engine").text
    assert 'id="qdrant-card"' in page
    assert "Qdrant not available: off" in text_of(page, "#engine-status")
    assert "Local mode" in text_of(page, "#qdrant-card")
    assert 'name="host"' not in page  # a local folder has no host to set


def test_enabled_the_chip_and_progress_say_so_and_a_test_search_finds_by_meaning(
    studio, svc, api_key
):
    svc.memories.create(api_key_id=api_key["id"], key="pet:dog", content="My golden retriever Max")
    enable(studio)
    synced(svc)
    page = studio.get("/dashboard/memory?tab=engine").text
    status = text_of(page, "#engine-status")
    assert "Qdrant working: used for retrieval · 1 points" in status
    assert "Qdrant: 1 points for 1 memories" in status
    found = studio.get(
        "/dashboard/memory",
        query_string={
            "tab": "engine",
            "qdrantTest": "search",
            "qdrantQuery": "golden retriever",
            "qdrantKey": api_key["id"],
        },
    ).text
    assert "My golden retriever Max" in text_of(found, "#qdrant-tests")
    health = studio.get("/dashboard/memory?tab=engine&qdrantTest=health").text
    assert "Qdrant answers" in text_of(health, "#qdrant-tests")
