"""The Engine tab's Qdrant chip and card, rendered by the server (local mode)."""

from __future__ import annotations

import pytest

from tests.html_checks import text_of
from tests.qdrant_helpers import enable, memory_app, synced


@pytest.fixture
def app(tmp_path, static_path):
    app = memory_app(tmp_path, None, static_path, QDRANT_PATH=str(tmp_path / "q"))
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


@pytest.mark.browser
def test_in_the_browser_an_admin_enables_qdrant_and_tests_a_search(page, svc, make_key):
    from playwright.sync_api import expect

    from tests.browser import log_in, screenshot

    key = make_key("laptop")
    svc.memories.create(api_key_id=key["id"], key="pet:dog", content="My golden retriever Max")
    log_in(page, "/dashboard/memory?tab=engine")
    card = page.locator("#qdrant-card")
    card.get_by_label("Qdrant enabled").check()
    card.get_by_label("Quantisation").select_option("int8")
    card.get_by_label("HNSW ef_construct").fill("256")
    card.get_by_role("button", name="Save Qdrant settings").click()
    expect(page.locator("#announcer")).to_have_text("Qdrant settings saved")
    saved = svc.qdrant.sync.settings.get()
    assert (saved.quantization, saved.hnsw_ef_construct, saved.vector_size) == ("int8", 256, None)
    expect(page.locator("#engine-status")).to_contain_text(
        "used for retrieval · 1 points", timeout=30_000
    )
    card = page.locator("#qdrant-card")
    card.get_by_label("Test search (by meaning, inside one key)").fill("golden retriever")
    card.get_by_label("API key").select_option(key["id"])
    card.get_by_role("button", name="Test search").click()
    expect(page.locator("#qdrant-tests")).to_contain_text("My golden retriever Max")
    page.locator("#qdrant-card").get_by_role("button", name="Test connection").click()
    expect(page.locator("#qdrant-tests")).to_contain_text("Qdrant answers")
    screenshot(page, "engine-qdrant")
