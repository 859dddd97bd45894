"""Shared fixtures.

Services (tests/servers): REDIS_URL / DATABASE_URL name real servers when given (pass (b) of CI).
Without them, tests that need Redis get a throwaway redis-server (`redis_url`, or one of their own),
and a selection that holds `postgres` tests runs on a throwaway PostgreSQL cluster (the whole
session: Django has one default database). A missing binary skips those tests, or under CI=true
fails the run. The embedded pass deselects them (`-m "not postgres"`) and stays on SQLite.
"""

from __future__ import annotations

import contextlib
import os
import socket
from urllib.parse import urlparse

import dj_database_url
import pytest
from asgiref.local import Local
from django.conf import settings
from django.db import connections

from tests.audit_flush import flush_past_append_only  # noqa: F401 - flushes lift the audit tables' delete guard
from tests.browser import browser, serial_live_server  # noqa: F401 - fixtures for every browser test
from tests.interrupt import install as install_interrupt_exit

CI = os.environ.get("CI", "").lower() == "true"


def _answers(url: str, default_port: int) -> bool:
    u = urlparse(url)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or default_port), timeout=2):
            return True
    except OSError:
        return False


def pytest_configure(config: pytest.Config) -> None:
    install_interrupt_exit()


def pytest_sessionstart(session: pytest.Session) -> None:
    for var, port in (("DATABASE_URL", 5432), ("REDIS_URL", 6379)):
        url = os.environ.get(var)
        if url and not _answers(url, port):
            msg = f"{var}={url} is set but nothing answers there"
            if CI:
                raise pytest.UsageError(msg)


def pytest_unconfigure(config: pytest.Config) -> None:
    # pytest-django deletes the SQLite test file (tests/settings.py) but not its WAL and shared-memory files.
    name = settings.DATABASES["default"].get("TEST", {}).get("NAME") or ""
    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3") and name.startswith(os.sep):
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(name + suffix)


@pytest.hookimpl(trylast=True)  # after `-m` / `-k` deselection: only tests that will run count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wants_pg = [item for item in items if "postgres" in item.keywords]
    on_pg = settings.DATABASES["default"]["ENGINE"].endswith("postgresql")
    if wants_pg and not on_pg and not os.environ.get("DATABASE_URL"):
        on_pg = _switch_to_throwaway_postgres(config)
    for item in wants_pg:
        if not on_pg:
            if CI:
                raise pytest.UsageError(
                    f"{item.nodeid} needs PostgreSQL: DATABASE_URL is not PostgreSQL and no PostgreSQL binaries "
                    "(initdb, pg_ctl) are installed to start a throwaway one (CI=true: it fails rather than skips)"
                )
            item.add_marker(pytest.mark.skip(reason="needs PostgreSQL: DATABASE_URL=postgres://… or initdb/pg_ctl"))


def _switch_to_throwaway_postgres(config: pytest.Config) -> bool:
    """Start a throwaway cluster and point Django's default database at it, before any test runs
    (no connection is open yet: pytest-django creates the test database in its first DB fixture)."""
    from tests.servers.postgres import PostgresServer, postgres_bin_dir

    bin_dir = postgres_bin_dir()
    if bin_dir is None:
        return False
    server = PostgresServer(bin_dir)
    config.add_cleanup(server.stop)
    server.start()
    os.environ["DATABASE_URL"] = server.url  # subprocesses (manage.py, celery workers) see it too
    settings.DATABASES["default"] = dj_database_url.parse(server.url, conn_max_age=60)
    connections.close_all()
    # Forget the SQLite wrapper objects too: the handler re-reads settings.DATABASES on next use.
    connections.__dict__.pop("settings", None)
    connections._connections = Local(connections.thread_critical)
    config.stash[_THROWAWAY_PG] = server.url
    return True


_THROWAWAY_PG = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if config.stash.get(_THROWAWAY_PG, None):
        terminalreporter.write_line(f"ran on a throwaway PostgreSQL: {config.stash[_THROWAWAY_PG]}")


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    """A Redis the test may write to under a key prefix of its own (never flushed): REDIS_URL when
    given, otherwise a throwaway redis-server for the session."""
    given = os.environ.get("REDIS_URL")
    if given:
        yield given
        return
    from tests.servers.redis import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server.url
    server.stop()


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


@pytest.fixture(autouse=True)
def _no_events_across_tests(_registry):
    """A test's unsent admission events die with it. The process-wide buffer's thread would otherwise
    write them (and dead-letter the refused ones) into a later test's database on its own connection,
    committed past that test's rollback. Set up after the database, so torn down before it."""
    yield
    from admission import events

    buf = events._buffer
    if buf is None or not buf._flushing.acquire(timeout=10):  # a flush in progress finishes first
        return
    try:
        with buf._lock:
            buf._q.clear()
    finally:
        buf._flushing.release()


@pytest.fixture
def fleet(db):
    """A small fleet: one model, one region with two zones, two pools of 280 CU each, no reserves."""
    from tests import factories as f

    return f.build_fleet()
