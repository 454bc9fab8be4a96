"""The studio end to end, in headless Chromium driven by Playwright, against the real server.

Screenshots of every page land in test-artifacts/studio/ (not committed).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from omniroute import create_app
from omniroute.memory.model import MemoryFilter
from tests.conftest import ADMIN_TOKEN
from tests.gateway_server import RunningGateway

CHROMIUM = "/usr/bin/chromium"
# The flags that keep Chromium off the network on this closed machine.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Assertions wait this long (the status region polls every 5 s; the default wait is 5 s too).
expect.set_options(timeout=20_000)
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "studio"


@pytest.fixture(scope="module")
def browser():
    assert Path(CHROMIUM).exists(), "Chromium is missing: `make test` installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@contextmanager
def browsing(browser, app) -> Iterator[Page]:
    """A fresh browser page on `app`, served as in production; the page must log no error."""
    running = RunningGateway(app).start()
    context = browser.new_context(
        base_url=running.url,
        viewport={"width": 1280, "height": 900},
        permissions=["clipboard-read", "clipboard-write"],
    )
    context.set_default_timeout(20_000)
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on(
        "console",
        lambda message: (
            problems.append(f"console: {message.text}") if message.type == "error" else None
        ),
    )
    page.problems = problems  # a test that expects an error clears it
    try:
        yield page
    finally:
        context.close()
        running.stop()
    assert problems == [], "the browser reported errors"


@pytest.fixture
def page(browser, app):
    with browsing(browser, app) as page:
        yield page


def expect_refusal(page: Page, status: str) -> None:
    """Chromium logs every 4xx answer as a console error: accept exactly this one."""
    message = f"console: Failed to load resource: the server responded with a status of {status}"
    assert page.problems == [message]
    page.problems.clear()


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page: Page, path: str = "/dashboard") -> None:
    page.goto(path)
    expect(page).to_have_url(re.compile(r"/dashboard/login"))
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def row(page: Page, key: str):
    return page.locator("#memory-list tbody tr:not(.edit-row)").filter(
        has=page.locator(f'td[data-label="Key"] code:text-is("{key}")')
    )


def test_a_wrong_token_is_refused_and_the_right_one_lets_in(page):
    page.goto("/dashboard/keys")
    page.get_by_label("Admin token").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("That is not the admin token.")
    expect_refusal(page, "401 (Unauthorized)")
    page.get_by_label("Admin token").fill(ADMIN_TOKEN)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/dashboard/keys$"))
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_label("Admin token")).to_be_visible()
    page.goto("/dashboard/memory")
    expect(page.get_by_label("Admin token")).to_be_visible()


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


def test_the_engine_tab_reindexes_and_saves_settings(page, svc, make_key):
    key = make_key("laptop")
    svc.memories.create(api_key_id=key["id"], key="lang", content="Prefers Go")
    log_in(page, "/dashboard/memory?tab=engine")
    status = page.locator("#engine-status")
    for chip in ("Keyword", "Embedding", "Vector store", "Rerank"):
        expect(status.get_by_text(chip, exact=True)).to_be_visible()
    expect(status).to_contain_text("Memories with a vector: 0 of 1")
    screenshot(page, "engine")

    page.get_by_role("button", name="Reindex now").click()
    expect(page.locator("#announcer")).to_have_text("Reindex started")

    page.get_by_label("Rerank enabled").check()
    page.get_by_label("Rerank model").fill("nowhere/rerank-1")
    page.get_by_role("button", name="Save rerank settings").click()
    expect(status).to_contain_text("no provider for 'nowhere/rerank-1'")
    settings = svc.memory_settings.get()
    assert settings["rerankEnabled"] is True
    assert settings["rerankProviderModel"] == "nowhere/rerank-1"


def test_the_switch_turns_memory_on_with_the_token_cost_warning(page, svc):
    log_in(page)
    switch = page.get_by_role("switch", name="Use memory in chat requests")
    expect(switch).not_to_be_checked()
    switch.check()
    expect(page.locator("#memory-switch .warning")).to_contain_text("extra prompt tokens")
    assert svc.memory_settings.get()["enabled"] is True
    expect(page.get_by_role("switch", name="Use memory in chat requests")).to_be_focused()


def test_create_a_key_copy_its_secret_once_and_revoke_it(page, svc):
    log_in(page, "/dashboard/keys")
    page.get_by_label("Name").fill("team bot")
    page.get_by_role("button", name="Create key").click()
    secret_box = page.get_by_label("Secret of the new key")
    expect(secret_box).to_have_value(re.compile(r"^sk-omr-"))
    secret = secret_box.input_value()
    page.get_by_role("button", name="Copy").click()
    expect(page.locator("#announcer")).to_have_text("Copied to the clipboard")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    assert svc.keys.authenticate(secret).name == "team bot"
    expect(page.locator("#key-list")).to_contain_text("team bot")
    screenshot(page, "keys")

    page.reload()
    assert secret not in page.content()  # shown that once only
    page.once("dialog", lambda confirm: confirm.accept())
    page.get_by_role("button", name="Revoke team bot").click()
    expect(page.locator("#key-list")).to_contain_text("No active keys yet.")
    assert svc.keys.authenticate(secret) is None


def test_add_edit_and_remove_a_provider_with_its_key_masked(page, svc):
    log_in(page, "/dashboard/providers")
    page.get_by_label("Id (the prefix").fill("acme")
    page.locator("#new-url").fill("https://api.acme.example/v1")
    page.locator("#new-key").fill("sk-acme-secret-4242")
    page.locator("#new-models").fill("chat-large\nchat-small")
    page.locator("#new-emb").fill("embed-1 768")
    page.get_by_role("button", name="Add provider").click()
    listing = page.locator("#provider-list")
    expect(listing).to_contain_text("https://api.acme.example/v1 · key: ...4242 · 2 chat models")
    assert "sk-acme-secret-4242" not in page.content()
    provider = svc.providers.get("acme")
    assert provider.api_key == "sk-acme-secret-4242"
    assert provider.embedding_models == [{"id": "embed-1", "dimensions": 768}]
    screenshot(page, "providers")

    page.get_by_role("button", name="Edit acme").click()
    edit = page.get_by_role("form", name="Edit provider acme")
    edit.get_by_label("Chat models").fill("chat-huge")
    edit.get_by_role("button", name="Save", exact=True).click()
    expect(listing).to_contain_text("1 chat model")
    assert svc.providers.get("acme").models == ["chat-huge"]
    assert svc.providers.get("acme").api_key == "sk-acme-secret-4242"  # empty field: kept

    page.once("dialog", lambda confirm: confirm.accept())
    page.get_by_role("button", name="Remove acme").click()
    expect(listing).to_contain_text("No providers yet")
    assert svc.providers.get("acme") is None


def test_the_keyboard_reaches_everything_and_escape_closes(page, make_key, svc):
    key = make_key("laptop")
    svc.memories.create(api_key_id=key["id"], key="lang", content="Prefers Go")
    log_in(page)
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.get_by_role("button", name="Add memory").focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Add a memory")
    expect(dialog).to_be_visible()
    assert page.evaluate("document.querySelector('#add-memory').contains(document.activeElement)")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    page.get_by_role("button", name="Edit lang", exact=True).focus()
    page.keyboard.press("Enter")
    content = page.get_by_role("form", name="Edit memory lang").get_by_label("Key")
    expect(content).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("form", name="Edit memory lang")).to_be_hidden()
    expect(page.get_by_role("button", name="Edit lang", exact=True)).to_be_focused()


def test_pages_fit_a_phone_screen(page, make_key, svc):
    key = make_key("phone")
    svc.memories.create(api_key_id=key["id"], key="lang", content="Prefers Go " * 20)
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page)
    for path, name in [
        ("/dashboard/memory", "memories-phone"),
        ("/dashboard/memory?tab=playground&query=go", "playground-phone"),
        ("/dashboard/memory?tab=engine", "engine-phone"),
        ("/dashboard/keys", "keys-phone"),
        ("/dashboard/providers", "providers-phone"),
    ]:
        page.goto(path)
        if name == "memories-phone":  # rows become blocks; the edit form stays folded away
            expect(page.get_by_role("form", name="Edit memory lang")).to_be_hidden()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} scrolls sideways at phone width ({width}px)"
        screenshot(page, name)


@pytest.fixture
def engine_page(browser, engine_app):
    """A page on a server whose memories are embedded by the distilled static model."""
    with browsing(browser, engine_app) as page:
        yield page


def test_the_engine_tab_follows_the_backfill_and_switches_the_source(engine_page, engine_app):
    page = engine_page
    svc = engine_app.extensions["omniroute"]
    key, _ = svc.keys.create("laptop")
    for number in range(3):
        svc.memories.create(api_key_id=key.id, key=f"k{number}", content=f"fact {number}")
    log_in(page, "/dashboard/memory?tab=engine")
    status = page.locator("#engine-status")
    expect(status).to_contain_text("Memories with a vector: 3 of 3")
    expect(status).to_contain_text("static")

    # The page keeps itself current: a memory added elsewhere shows up without a reload.
    svc.memories.create(api_key_id=key.id, key="k3", content="fact 3")
    expect(status).to_contain_text("Memories with a vector: 4 of 4")

    page.get_by_label("Source", exact=True).select_option("auto")
    page.get_by_label("Static model enabled").uncheck()
    page.get_by_label("Transformers enabled").check()
    page.get_by_role("button", name="Save embedding settings").click()
    expect(status).to_contain_text("transformers · all-MiniLM-L6-v2 · 384 dims")
    expect(status).to_contain_text("Memories with a vector: 4 of 4")  # re-embedded by MiniLM
    settings = svc.memory_settings.get()
    assert (settings["embeddingSource"], settings["staticEnabled"]) == ("auto", False)
    assert settings["transformersEnabled"] is True


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
