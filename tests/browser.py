"""Browser-test fixtures shared by every Playwright test (re-exported by tests/conftest.py).

Debian's Chromium, headless; under CI=true a missing Chromium fails the run instead of skipping.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Any:
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing; browser tests must run under CI (.ci/run installs it)")
        pytest.skip(f"{CHROMIUM} is not installed")
    # Playwright's sync API runs an event loop in this thread; the test's ORM calls stay synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def serial_live_server(live_server: Any) -> Any:
    """pytest-django's threaded live_server (the name is kept for the tests that use it). It once
    served one request at a time on SQLite's in-memory test database, a single connection shared
    between threads; the suite's SQLite test database is a file now (tests/settings.py)."""
    return live_server


def sign_in(browser: Any, base: str, username: str, password: str = "demo") -> tuple[Any, Any]:
    """A new browser context signed in as `username`; returns (context, page) on the home page."""
    ctx = browser.new_context(base_url=base, viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return ctx, page
