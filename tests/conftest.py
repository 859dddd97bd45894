"""Shared fixtures.

Under CI=true, a configured service that does not answer fails the run instead of skipping it.
Tests marked `postgres` run only when DATABASE_URL points at PostgreSQL; the embedded pass
deselects them (`-m "not postgres"`) rather than skipping them silently.
"""

from __future__ import annotations

import os
import socket
from urllib.parse import urlparse

import pytest
from django.conf import settings

from tests.audit_flush import flush_past_append_only  # noqa: F401 - flushes lift the audit tables' delete guard
from tests.browser import browser, serial_live_server  # noqa: F401 - fixtures for every browser test

CI = os.environ.get("CI", "").lower() == "true"


def _answers(url: str, default_port: int) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def pytest_sessionstart(session: pytest.Session) -> None:
    for var, port in (("DATABASE_URL", 5432), ("REDIS_URL", 6379)):
        url = os.environ.get(var)
        if url and not _answers(url, port):
            msg = f"{var}={url} is set but nothing answers there"
            if CI:
                raise pytest.UsageError(msg)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    on_pg = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    for item in items:
        if "postgres" in item.keywords and not on_pg:
            if CI and os.environ.get("HEADROOM_REQUIRE_POSTGRES") == "1":
                raise pytest.UsageError(f"{item.nodeid} needs PostgreSQL but DATABASE_URL is not PostgreSQL")
            item.add_marker(pytest.mark.skip(reason="needs DATABASE_URL=postgres://…"))


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    # PBKDF2 at full strength dominates suites that create many users.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Tests read hour and day rollups right after ingest: fold them on every batch.
    # (tests/telemetry/test_fold.py checks the lag and the fold with the production setting.)
    settings.TELEMETRY_FOLD_EVERY_S = 0


@pytest.fixture(autouse=True)
def _registry(request):
    """Transactional tests flush the tables migrations seeded; put the registry back for every DB test."""
    uses_db = {"db", "transactional_db", "live_server", "django_db_reset_sequences"} & set(request.fixturenames)
    if not uses_db and request.node.get_closest_marker("django_db") is None:
        return
    request.getfixturevalue(
        "transactional_db"
        if "transactional_db" in request.fixturenames or "live_server" in request.fixturenames
        else "db"
    )
    from entitlements.models import ReasonCode, TrafficClass
    from entitlements.reasons import ensure_registry

    ensure_registry(ReasonCode, TrafficClass)


@pytest.fixture
def fleet(db):
    """A small fleet: one model, one region with two zones, two pools of 280 CU each, no reserves."""
    from tests import factories as f

    return f.build_fleet()
