"""Browser fixtures for the studio's end-to-end tests: Debian's Chromium driven by Playwright.

Loaded as a pytest plugin (tests/conftest.py). Screenshots land in test-artifacts/studio/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from tests.gateway_server import RunningGateway
from tests.helpers import ADMIN_TOKEN

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


@pytest.fixture(scope="session")
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


@pytest.fixture
def engine_page(browser, engine_app):
    """A page on a server whose memories are embedded by the distilled static model."""
    with browsing(browser, engine_app) as page:
        yield page
