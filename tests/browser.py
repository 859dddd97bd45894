"""Browser-test fixtures shared by every Playwright test (re-exported by tests/conftest.py).

Debian's Chromium, headless; under CI=true a missing Chromium fails the run instead of skipping.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from django.core.servers.basehttp import WSGIServer
from django.db import connection
from django.test.testcases import LiveServerThread

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


class _SerialWSGIServer(WSGIServer):
    """One request at a time. SQLite's in-memory test database is a single connection that the
    threaded live server would share between request threads ("database table is locked")."""

    def __init__(self, *args: Any, connections_override: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connections_override = connections_override  # the server thread already applies it


@pytest.fixture
def serial_live_server(request: pytest.FixtureRequest) -> Any:
    """pytest-django's live_server, made single-threaded when the test database is in-memory SQLite."""
    if not (connection.vendor == "sqlite" and connection.is_in_memory_db()):
        return request.getfixturevalue("live_server")
    original = LiveServerThread.server_class
    LiveServerThread.server_class = _SerialWSGIServer
    try:
        return request.getfixturevalue("live_server")
    finally:
        LiveServerThread.server_class = original  # the running server keeps its class


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
