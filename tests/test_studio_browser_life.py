"""The memory life cycle in the studio, in headless Chromium: compacting old memories (a dry
run, then the real one), the periodic jobs on the Engine tab, and erasing a key behind a
typed confirmation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from omniroute.memory.model import MemoryFilter
from tests.browser import log_in, screenshot
from tests.helpers import backdate

pytestmark = pytest.mark.browser


def test_compact_shows_what_it_would_fold_then_folds_it(page, svc, make_key):
    key = make_key("laptop")
    for name, content in (("tea", "I like tea. Every day."), ("vim", "I use Vim. Always.")):
        svc.memories.create(api_key_id=key["id"], key=name, content=content)
        backdate(svc.memories, name, 40)
    svc.memories.create(api_key_id=key["id"], key="fresh", content="New here.")
    log_in(page, "/dashboard/memory")
    card = page.locator("section", has=page.get_by_role("heading", name="Compact old memories"))
    card.get_by_label("Older than (days)").fill("30")
    card.get_by_role("button", name="Preview").click()
    preview = page.locator("#compact-preview")
    expect(preview).to_contain_text("2 memories older than 30 days")
    expect(preview).to_contain_text("tokens saved")
    expect(preview.get_by_role("cell", name="tea")).to_be_visible()
    assert len(svc.memories.find(MemoryFilter(api_key_id=key["id"]))) == 3, "a preview only"
    screenshot(page, "compact-preview")
    preview.get_by_role("button", name="Fold 2 memories into summaries").click()
    expect(page.locator("#announcer")).to_have_text("Compacted 2 memories into summaries")
    expect(preview).to_contain_text("nothing to fold")
    left = sorted(m.key for m in svc.memories.find(MemoryFilter(api_key_id=key["id"])))
    assert left[0] == "fresh" and left[1].startswith("summary_") and len(left) == 2
    expect(page.locator("#memory-list")).to_contain_text("Summary of 2 memories")


def test_a_bad_number_of_days_is_named_not_run(page):
    log_in(page, "/dashboard/memory?tab=memories&compactDays=0")
    expect(page.locator("#compact-days-error")).to_have_text(
        "Give a whole number of days from 1 to 365."
    )


def test_the_engine_tab_lists_the_periodic_jobs_and_runs_one(page, svc):
    log_in(page, "/dashboard/memory?tab=engine")
    jobs = page.locator("#periodic-jobs")
    for job_id in ("outbox-sweep", "retention-sweep", "summarize"):
        expect(jobs.get_by_role("rowheader", name=job_id)).to_be_visible()
    expect(jobs).to_contain_text("a thread of the web process")
    row = jobs.locator("#job-summarize")
    row.get_by_role("button", name="Run now summarize").click()
    expect(page.locator("#announcer")).to_have_text("summarize ran")
    expect(page.locator("#job-summarize")).to_contain_text("the autoSummarize setting is off")
    assert svc.periodic_runs.all()["summarize"]["status"] == "ok"
    screenshot(page, "periodic-jobs")
    life = page.locator("section", has=page.get_by_role("heading", name="Life cycle"))
    life.get_by_label("Summarise aged memories every day").check()
    life.get_by_label("Summarise memories older than").fill("60")
    life.get_by_role("button", name="Save life-cycle settings").click()
    expect(page.locator("#announcer")).to_have_text("Life-cycle settings saved")
    settings = svc.memory_settings.get()
    assert (settings.auto_summarize, settings.auto_summarize_days) == (True, 60)
    assert settings.summarize_provider_model is None and settings.retention_sweep is False


def test_erase_needs_the_keys_name_typed_then_removes_everything(page, svc, make_key):
    key = make_key("alice phone")
    keep = make_key("bob")
    svc.memories.create(api_key_id=key["id"], key="k", content="Alice's secret")
    svc.memories.create(api_key_id=keep["id"], key="k", content="Bob's")
    log_in(page, "/dashboard/keys")
    page.get_by_role("button", name="Erase… alice phone").click()
    dialog = page.get_by_role("dialog", name="Erase “alice phone”")
    dialog.get_by_label("Type the key's name").fill("alice")
    dialog.get_by_role("button", name="Erase everything of “alice phone”").click()
    expect(dialog.get_by_role("alert")).to_have_text("Type “alice phone” exactly to confirm.")
    assert svc.memories.find(MemoryFilter(api_key_id=key["id"])), "nothing erased yet"
    dialog.get_by_label("Type the key's name").fill("alice phone")
    dialog.get_by_role("button", name="Erase everything of “alice phone”").click()
    expect(page.locator("#announcer")).to_contain_text("erased")
    assert svc.memories.find(MemoryFilter(api_key_id=key["id"])) == []
    assert svc.memories.history(svc.memories.find(MemoryFilter(api_key_id=keep["id"]))[0].id)
    expect(page.locator("#key-list")).not_to_contain_text("alice phone")
    expect(page.locator("#revoked-list")).to_contain_text("alice phone")


def test_a_revoked_keys_memories_can_be_erased_later(page, svc, make_key):
    key = make_key("old laptop")
    svc.memories.create(api_key_id=key["id"], key="k", content="kept after revoking")
    svc.keys.revoke(key["id"])
    log_in(page, "/dashboard/keys")
    revoked = page.locator("#revoked-list")
    revoked.get_by_role("button", name="Erase… old laptop").click()
    dialog = page.get_by_role("dialog", name="Erase “old laptop”")
    dialog.get_by_label("Type the key's name").fill("old laptop")
    dialog.get_by_role("button", name="Erase everything of “old laptop”").click()
    expect(page.locator("#announcer")).to_contain_text("erased")
    assert svc.memories.find(MemoryFilter(api_key_id=key["id"])) == []
