"""Throwaway Redis and PostgreSQL servers for the tests, started from the installed binaries.

`make test` on a machine with nothing running: a test that needs Redis or PostgreSQL and is not
given REDIS_URL / DATABASE_URL starts its own server on a free loopback port, in a directory of its
own, and removes it afterwards. When the binary is missing the test is skipped, except under
CI=true, where it fails: CI never passes by skipping what it was meant to run.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import NoReturn

import pytest

CI = os.environ.get("CI", "").lower() == "true"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unavailable(msg: str) -> NoReturn:
    """A service a test needs cannot be had: skip it, or under CI=true fail it."""
    if CI:
        pytest.fail(f"{msg} (CI=true: a test that needs it fails rather than skips)", pytrace=False)
    pytest.skip(msg)


_WATCHDOG = """
import os, subprocess, sys, time
parent = int(sys.argv[1])
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""


def on_pytest_death(*cleanup: str) -> subprocess.Popen:
    """Run `cleanup` once this pytest process is gone, however it ended (a `timeout` SIGTERM or a
    SIGKILL skips pytest's own teardown, and a server started here would outlive the run).
    Terminate the returned watchdog after a normal teardown."""
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *cleanup],
        start_new_session=True,  # a signal to pytest's process group does not end the watchdog too
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def child_db_env() -> dict[str, str]:
    """Environment for a child process (gunicorn, a Celery worker) to use the test's own database: the
    SQLite file, or the PostgreSQL test database by URL. Only the one variable the settings read is set;
    the other is removed, so a child never falls back to a file named after a PostgreSQL database."""
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    if db["ENGINE"].endswith("sqlite3"):
        env.pop("DATABASE_URL", None)
        env["SQLITE_PATH"] = str(db["NAME"])
        return env
    env.pop("SQLITE_PATH", None)
    user, host, port = db.get("USER") or "postgres", db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    auth = f"{user}:{db['PASSWORD']}" if db.get("PASSWORD") else user
    env["DATABASE_URL"] = f"postgres://{auth}@{host}:{port}/{db['NAME']}"
    return env
