"""The throwaway servers: with nothing given, a test that needs Redis or PostgreSQL gets one started
from the installed binaries; without the binaries it is skipped, and under CI=true it fails.

Each case runs a child pytest on a probe module with a doctored environment (no REDIS_URL or
DATABASE_URL; PATH and HEADROOM_PG_BIN_GLOB hiding the binaries where the case says so).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Each case is a child pytest, and two start real servers (initdb, redis-server): `make test-slow`.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def child(probe: str, *, ci: bool, hide_binaries: bool, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "CI", "PYTEST_ADDOPTS")}
    env["SQLITE_PATH"] = str(tmp_path / "db.sqlite3")
    if ci:
        env["CI"] = "true"
    if hide_binaries:
        bare = tmp_path / "bin"  # python only: no redis-server, initdb or pg_ctl to be found
        bare.mkdir()
        (bare / "python").symlink_to(sys.executable)
        env["PATH"] = str(bare)
        env["HEADROOM_PG_BIN_GLOB"] = str(tmp_path / "no-postgresql" / "*" / "bin")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", str(HERE / probe)],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip


def needs(binary: str) -> None:
    if not shutil.which(binary):
        pytest.skip(f"{binary} is not installed here")  # the hidden-binary cases below still run


def test_a_redis_test_gets_a_throwaway_server(tmp_path):
    needs("redis-server")
    done = child("probe_needs_redis.py", ci=True, hide_binaries=False, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout


def test_a_postgres_test_gets_a_throwaway_cluster(tmp_path):
    done = child("probe_needs_postgres.py", ci=True, hide_binaries=False, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout and "ran on a throwaway PostgreSQL" in done.stdout


@pytest.mark.parametrize("probe", ["probe_needs_redis.py", "probe_needs_postgres.py"])
def test_without_the_binaries_it_is_skipped_outside_ci(probe, tmp_path):
    done = child(probe, ci=False, hide_binaries=True, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 skipped" in done.stdout


@pytest.mark.parametrize("probe", ["probe_needs_redis.py", "probe_needs_postgres.py"])
def test_without_the_binaries_it_fails_under_ci(probe, tmp_path):
    done = child(probe, ci=True, hide_binaries=True, tmp_path=tmp_path)
    assert done.returncode != 0
    assert "skipped" not in done.stdout
    assert "CI=true" in done.stdout + done.stderr
