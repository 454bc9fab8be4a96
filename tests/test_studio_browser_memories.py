"""The studio's memory pages end to end in headless Chromium: life cycle, export, import,
playground and health."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from omniroute.factory import create_app
from omniroute.memory.model import MemoryFilter
from tests.browser import browsing, expect_refusal, log_in, row, screenshot
from tests.helpers import ADMIN_TOKEN

pytestmark = pytest.mark.browser


def test_the_memory_life_cycle_add_find_edit_delete(page, svc, make_key):
    key = make_key("laptop")
    svc.memories.create(api_key_id=key["id"], key="city", content="Lives in Ghent")
    log_in(page)
    expect(page.locator("#health.is-ok")).to_be_visible()  # the pipeline check went green
    screenshot(page, "memories")

    page.get_by_role("button", name="Add memory").click()
    dialog = page.get_by_role("dialog", name="Add a memory")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Key", exact=True).fill("editor")
    dialog.get_by_label("Content").fill("Prefers Neovim over VS Code")
    dialog.get_by_label("Type").select_option("semantic")
    dialog.get_by_role("button", name="Add").click()
    expect(dialog).to_be_hidden()
    expect(row(page, "editor")).to_contain_text("Prefers Neovim over VS Code")
    expect(page.locator("#announcer")).to_have_text("Memory added")

    fetches: list[str] = []
    page.on("request", lambda r: fetches.append(r.url) if "q=neo" in r.url else None)
    page.get_by_label("Search key or content").press_sequentially("neovim", delay=40)
    expect(page.locator("#memory-list tbody tr:not(.edit-row)")).to_have_count(1)
    expect(row(page, "editor")).to_be_visible()
    assert "q=neovim" in page.url
    assert 1 <= len(fetches) < len("neovim")  # debounced: not one fetch per keystroke

    page.get_by_role("button", name="Edit editor", exact=True).click()
    edit = page.get_by_role("form", name="Edit memory editor")
    edit.get_by_label("Content").fill("Prefers Helix now")
    edit.get_by_role("button", name="Save").click()
    page.get_by_label("Search key or content").fill("helix")
    expect(row(page, "editor")).to_contain_text("Prefers Helix now")
    assert svc.memories.find(MemoryFilter(text="helix"))[0].content == "Prefers Helix now"
    page.get_by_role("link", name="History of editor").click()
    history = page.locator(".history")
    expect(history).to_contain_text("Prefers Neovim over VS Code → Prefers Helix now")
    screenshot(page, "history")
    page.go_back()

    page.once("dialog", lambda confirm: confirm.accept())
    page.get_by_role("button", name="Delete editor", exact=True).click()
    expect(page.locator("#memory-list")).to_contain_text("No memories match this filter")
    assert svc.memories.find(MemoryFilter(text="helix")) == []
    assert len(svc.memories.find(MemoryFilter())) == 1  # "city" is untouched


def test_a_bad_memory_gets_its_field_marked_and_nothing_is_saved(page, svc, make_key):
    make_key("laptop")
    log_in(page)
    page.get_by_role("button", name="Add memory").click()
    dialog = page.get_by_role("dialog", name="Add a memory")
    dialog.get_by_label("Key", exact=True).fill("blank")
    dialog.get_by_label("Content").fill("   ")
    dialog.get_by_role("button", name="Add").click()
    expect(dialog.get_by_role("alert")).to_contain_text("content")
    expect(dialog.get_by_label("Content")).to_have_attribute("aria-invalid", "true")
    expect(dialog).to_be_visible()
    expect_refusal(page, "422 (Unprocessable Entity)")
    assert svc.memories.find(MemoryFilter()) == []


def test_export_takes_every_page_and_import_brings_it_back(page, svc, make_key, tmp_path):
    key = make_key("laptop")
    for number in range(25):
        svc.memories.create(api_key_id=key["id"], key=f"fact-{number:02}", content=f"Fact {number}")
    log_in(page)
    expect(page.get_by_text("Page 1 of 2")).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("link", name="Export all 25 as JSON").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["count"] == 25
    assert len({memory["key"] for memory in exported["memories"]}) == 25

    for memory in svc.memories.find(MemoryFilter(), limit=100):
        svc.memories.delete(memory.id)
    exported["memories"].append({"key": "broken", "content": ""})
    upload = tmp_path / "memories.json"
    upload.write_text(json.dumps(exported))
    page.reload()
    expect(page.locator("#memory-list")).to_contain_text("No memories yet")
    page.get_by_label("JSON file").set_input_files(str(upload))
    page.get_by_label("Import into").select_option(label="laptop (" + key["prefix"] + "…)")
    page.get_by_role("button", name="Import").click()
    result = page.locator("#import-result")
    expect(result).to_contain_text("25 created, 0 updated, 1 failed")
    expect(result).to_contain_text("#26 broken: failed (content:")
    expect(page.locator("#memory-list")).to_contain_text("25 memories")
    assert len(svc.memories.find(MemoryFilter(), limit=100)) == 25


def test_a_big_import_goes_in_requests_the_server_accepts(browser, tmp_path):
    app = create_app(
        {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN, "MAX_BODY_BYTES": 4096}
    )
    svc = app.extensions["omniroute"]
    key, _ = svc.keys.create("laptop")
    items = [{"key": f"fact-{n:03}", "content": f"Fact number {n} " * 4} for n in range(80)]
    items.insert(40, {"key": "huge", "content": "x" * 5000})  # over the limit on its own
    upload = tmp_path / "big.json"
    upload.write_text(json.dumps({"memories": items}))
    assert upload.stat().st_size > 3 * 4096
    with browsing(browser, app) as page:
        log_in(page)
        page.get_by_label("JSON file").set_input_files(str(upload))
        page.get_by_label("Import into").select_option(key.id)
        page.get_by_role("button", name="Import").click()
        result = page.locator("#import-result")
        expect(result).to_contain_text("80 created, 0 updated, 1 failed")
        expect(result).to_contain_text("#41 huge: failed (body: Larger than the server accepts")
        expect(result.locator("details li").nth(41)).to_have_text("#42 fact-040: created")
    assert len(svc.memories.find(MemoryFilter(), limit=200)) == 80
    svc.close()


def test_the_playground_shows_the_ranking_and_its_resolution(page, svc, make_key):
    key = make_key("laptop")
    svc.memories.create(api_key_id=key["id"], key="lang", content="Prefers Go over Python")
    svc.memories.create(api_key_id=key["id"], key="pet", content="Has a cat called Miso")
    log_in(page, "/dashboard/memory?tab=playground")
    page.get_by_label("Query").fill("which language, go or python?")
    page.get_by_label("Strategy").select_option("keyword")
    page.get_by_label("Token budget").fill("500")
    page.get_by_label("API key").select_option(key["id"])
    page.get_by_role("button", name="Simulate").click()
    results = page.locator("#preview-results")
    expect(results.locator("tbody tr")).to_have_count(1)
    expect(results.locator('td[data-label="Key"]')).to_have_text("lang")
    expect(results.locator('td[data-label="Tier"]')).to_have_text("keyword")
    expect(results.locator('td[data-label="Injected"]')).to_have_text("yes")
    expect(results).to_contain_text("Strategy used")
    expect(results).to_contain_text("Vector store")
    assert "strategy=keyword" in page.url
    screenshot(page, "playground")


def test_the_health_dot_turns_red_when_the_pipeline_check_fails(page):
    failure = {"error": {"message": "Memory pipeline check failed: disk I/O error"}}
    page.route(
        "**/api/memory/health",
        lambda route: route.fulfill(status=503, json={**failure, "working": False}),
    )
    log_in(page)
    health = page.locator("#health")
    expect(health).to_have_class(re.compile(r"\bis-bad\b"))
    expect(health).to_contain_text("Pipeline failing: Memory pipeline check failed: disk I/O error")
    expect_refusal(page, "503 (Service Unavailable)")


def test_with_a_remote_primary_the_list_and_its_edits_are_the_backends(
    page, svc, make_key, memory_service
):
    svc.memory_settings.update(
        {"backendConfigs": {"brain": {"baseUrl": memory_service.url}}, "primaryBackend": "brain"}
    )
    key = make_key("laptop")
    kept = memory_service.add(apiKeyId=key["id"], key="editor", content="Prefers Neovim")
    log_in(page)
    expect(page.locator("#serving-backend")).to_contain_text("brain")
    page.get_by_role("button", name="Edit editor", exact=True).click()
    edit = page.get_by_role("form", name="Edit memory editor")
    edit.get_by_label("Content").fill("Prefers Helix now")
    edit.get_by_role("button", name="Save").click()
    expect(row(page, "editor")).to_contain_text("Prefers Helix now")
    assert memory_service.memories[kept["id"]]["content"] == "Prefers Helix now"
    page.once("dialog", lambda confirm: confirm.accept())
    page.get_by_role("button", name="Delete editor", exact=True).click()
    expect(page.locator("#memory-list")).to_contain_text("No memories yet")
    assert memory_service.memories == {}
    assert svc.memories.find(MemoryFilter()) == [], "nothing was written locally"
