"""The studio end to end in headless Chromium: login, engine, switch, keys, providers,
keyboard and phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import expect_refusal, log_in, screenshot
from tests.helpers import ADMIN_TOKEN, place_built_model

pytestmark = pytest.mark.browser


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
    assert settings.rerank_enabled is True
    assert settings.rerank_provider_model == "nowhere/rerank-1"


def test_the_switch_turns_memory_on_with_the_token_cost_warning(page, svc):
    log_in(page)
    switch = page.get_by_role("switch", name="Use memory in chat requests")
    expect(switch).not_to_be_checked()
    switch.check()
    expect(page.locator("#memory-switch .warning")).to_contain_text("extra prompt tokens")
    assert svc.memory_settings.get().enabled is True
    expect(page.get_by_role("switch", name="Use memory in chat requests")).to_be_focused()


def test_settings_memory_turns_memory_on_and_gives_end_users_their_own(page, svc):
    log_in(page, "/dashboard/settings")
    page.get_by_role("switch", name="Use memory in chat requests").check()
    expect(page.locator("#memory-switch .warning")).to_contain_text("extra prompt tokens")
    page.get_by_label("What a chat sees of its key").select_option("user")
    page.get_by_label("Share of the budget for global memories").fill("10")
    page.get_by_role("button", name="Save retrieval settings").click()
    expect(page.locator("#announcer")).to_have_text("Retrieval settings saved")
    saved = svc.memory_settings.get()
    assert (saved.enabled, saved.scope, saved.global_budget_percent) == (True, "user", 10)
    page.reload()
    expect(page.get_by_label("What a chat sees of its key")).to_have_value("user")
    screenshot(page, "settings-memory")


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


def test_a_key_is_made_read_only_and_given_write_back(page, svc):
    log_in(page, "/dashboard/keys")
    page.get_by_label("Name").fill("recall bot")
    page.locator("#new-key-write").uncheck()
    page.get_by_role("button", name="Create key").click()
    expect(page.get_by_label("Secret of the new key")).to_have_value(re.compile(r"^sk-omr-"))
    (key,) = svc.keys.list_keys()
    assert key.scopes == ("read:memory",)
    row = page.get_by_role("form", name="Scopes of recall bot")
    expect(row.get_by_label("write")).not_to_be_checked()
    row.get_by_label("write").check()
    row.get_by_role("button", name="Save").click()
    expect(page.locator("#announcer")).to_have_text("Scopes of “recall bot” saved")
    assert svc.keys.get(key.id).scopes == ("read:memory", "write:memory")
    row = page.get_by_role("form", name="Scopes of recall bot")
    row.get_by_label("read").uncheck()
    row.get_by_label("write").uncheck()
    # The announcement reads as after the first save: wait for this save's own answer.
    with page.expect_response(lambda r: r.request.method == "PATCH" and key.id in r.url):
        row.get_by_role("button", name="Save").click()
    expect(page.locator("#announcer")).to_have_text("Scopes of “recall bot” saved")
    assert svc.keys.get(key.id).scopes == ()


def test_the_activity_view_draws_its_charts_and_switches_windows(page, svc):
    for seconds in (0.004, 0.02, 0.03, 0.2):
        svc.activity.retrieval(seconds)
    svc.activity.add("chats", 4)
    svc.activity.add("injected", 6)
    svc.activity.add("tokens_added", 90)
    svc.activity.flush()
    log_in(page, "/dashboard/activity")
    expect(page.get_by_role("heading", name="Activity", exact=True)).to_be_visible()
    expect(page.get_by_role("img", name="Chats through the gateway")).to_be_visible()
    expect(page.get_by_role("img", name="Retrieval latency")).to_be_visible()
    expect(page.locator("dl.stats")).to_contain_text("Chats4")
    page.get_by_text("The numbers (requests, UTC)").click()
    expect(page.get_by_role("cell", name="4", exact=True).first).to_be_visible()
    screenshot(page, "activity")
    page.get_by_role("link", name="Last week").click()
    expect(page.get_by_role("link", name="Last week")).to_have_attribute("aria-current", "page")
    expect(page.locator("dl.stats")).to_contain_text("Chats4")


def test_the_engine_tab_chooses_the_memory_backends_and_tests_one(page, svc, memory_service):
    svc.memory_settings.update({"backendConfigs": {"brain": {"baseUrl": memory_service.url}}})
    log_in(page, "/dashboard/memory?tab=engine")
    card = page.locator("#backends-card")
    card.get_by_label("Primary backend").select_option("brain")
    card.locator("#backend-fallback-local").check()
    card.get_by_role("button", name="Save backends").click()
    expect(page.locator("#announcer")).to_have_text("Memory backends saved")
    settings = svc.memory_settings.get()
    assert (settings.primary_backend, settings.fallback_backends) == ("brain", ("sqlite",))
    assert svc.backends.current().primary.id == "brain"
    card = page.locator("#backends-card")
    card.get_by_label("Test the connection of").select_option("brain")
    card.get_by_role("button", name="Test connection").click()
    expect(page.locator("#backend-tests")).to_contain_text("brain answers")


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
        ("/dashboard/settings", "settings-phone"),
    ]:
        page.goto(path)
        if name == "memories-phone":  # rows become blocks; the edit form stays folded away
            expect(page.get_by_role("form", name="Edit memory lang")).to_be_hidden()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"{path} scrolls sideways at phone width ({width}px)"
        screenshot(page, name)


def save_source(page, source: str, check: str, uncheck: str | None = None) -> None:
    """Choose an embedding source and its switches on the engine tab, and save them."""
    page.get_by_label("Source", exact=True).select_option(source)
    if uncheck:
        page.get_by_label(uncheck).uncheck()
    page.get_by_label(check).check()
    page.get_by_role("button", name="Save embedding settings").click()


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

    save_source(page, "auto", check="Transformers enabled", uncheck="Static model enabled")
    expect(status).to_contain_text("transformers · all-MiniLM-L6-v2 · 384 dims")
    expect(status).to_contain_text("Memories with a vector: 4 of 4")  # re-embedded by MiniLM
    settings = svc.memory_settings.get()
    assert (settings.embedding_source, settings.static_enabled) == ("auto", False)
    assert settings.transformers_enabled is True


def test_the_engine_tab_switches_a_team_to_the_multilingual_source(
    engine_page, engine_app, multilingual_path
):
    page = engine_page
    svc = engine_app.extensions["omniroute"]
    place_built_model(svc.embeddings.multilingual_path(), multilingual_path)
    key, _ = svc.keys.create("team")
    for number, fact in enumerate(["Ik werk als verpleegkundige.", "Ich wohne in Leipzig."]):
        svc.memories.create(api_key_id=key.id, key=f"k{number}", content=fact)
    log_in(page, "/dashboard/memory?tab=engine")
    status = page.locator("#engine-status")
    expect(status).to_contain_text("Memories with a vector: 2 of 2")
    save_source(page, "multilingual", check="Multilingual model enabled")
    expect(status).to_contain_text("multilingual · multilingual-e5-small-int8 · 384 dims")
    expect(status).to_contain_text("Memories with a vector: 2 of 2")  # re-embedded by e5
    settings = svc.memory_settings.get()
    assert (settings.embedding_source, settings.multilingual_enabled) == ("multilingual", True)


# Here, with the other browser tests: Playwright's session-wide browser runs an event loop
# in this thread, which the asyncio tests of other modules must not meet.
def test_the_api_docs_render_under_their_policy(browser, gateway):
    context = browser.new_context()
    page = context.new_page()
    problems = []
    page.on("console", lambda m: m.type == "error" and problems.append(m.text))
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{gateway.url}/docs")
    page.wait_for_selector(".opblock-tag", timeout=20_000)
    assert page.locator(".opblock").count() > 20  # every operation of the spec
    assert problems == []
    context.close()
