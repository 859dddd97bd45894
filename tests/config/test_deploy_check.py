"""Production settings pass `manage.py check --deploy` and refuse to start without a secret key.

Each check runs `manage.py` in a fresh interpreter, because settings are read once per process.
The environment is the caller's minus every `DJANGO_*` variable, plus exactly what each case sets.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"
STRONG_KEY = secrets.token_urlsafe(64)
NO_ISSUES = "System check identified no issues (0 silenced)."


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    base["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env={**base, **env},
        capture_output=True,
        text=True,
        cwd=MANAGE.parent,
        timeout=300,  # a guard against a hung child, not a performance limit
    )


def test_deploy_check_passes_on_production_settings_without_warnings():
    proc = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY=STRONG_KEY,
        DJANGO_ALLOWED_HOSTS="headroom.example",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "WARNINGS" not in out
    assert "ERRORS" not in out
    assert proc.stdout.strip().splitlines()[-1] == NO_ISSUES


def test_deploy_check_fails_on_a_weak_key_so_the_check_above_can_fail():
    # Negative control: the same command with a short key must report security.W009 and fail.
    proc = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_DEBUG="0",
        DJANGO_SECRET_KEY="too-short",
        DJANGO_ALLOWED_HOSTS="headroom.example",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "WARNINGS" in out
    assert "(security.W009)" in out


def test_deploy_check_fails_when_debug_is_on():
    # Negative control: DEBUG on is what `--deploy` exists to catch (security.W018).
    proc = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_DEBUG="1",
        DJANGO_SECRET_KEY=STRONG_KEY,
        DJANGO_ALLOWED_HOSTS="headroom.example",
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "(security.W018)" in out


def test_settings_refuse_to_start_without_a_secret_key_when_debug_is_off():
    proc = manage("check", DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode != 0, proc.stdout
    assert "DJANGO_SECRET_KEY" in proc.stderr
    assert NO_ISSUES not in proc.stdout


def test_settings_refuse_an_empty_secret_key_when_debug_is_off():
    proc = manage("check", DJANGO_DEBUG="0", DJANGO_SECRET_KEY="", DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode != 0, proc.stdout
    assert "DJANGO_SECRET_KEY" in proc.stderr
    assert NO_ISSUES not in proc.stdout
