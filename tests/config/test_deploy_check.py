"""Production settings pass `manage.py check --deploy`; the web app refuses to serve without a key.

Each check runs `manage.py` (or imports the WSGI app) in a fresh interpreter, because settings are
read once per process.
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


def wsgi(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    base["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, "-c", "import config.wsgi"],
        env={**base, **env},
        capture_output=True,
        text=True,
        cwd=MANAGE.parent,
        timeout=300,  # a guard against a hung child, not a performance limit
    )


def test_debug_is_off_unless_asked_for():
    show = "from django.conf import settings; print(settings.DEBUG)"
    proc = manage("shell", "-c", show)
    assert proc.stdout.strip().splitlines()[-1] == "False", proc.stderr
    assert manage("shell", "-c", show, DJANGO_DEBUG="1").stdout.strip().splitlines()[-1] == "True"


def test_serving_refuses_to_start_without_a_secret_key_when_debug_is_off():
    proc = wsgi(DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in proc.stderr


def test_serving_refuses_an_empty_secret_key_when_debug_is_off():
    proc = wsgi(DJANGO_SECRET_KEY="", DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode != 0
    assert "DJANGO_SECRET_KEY must be set" in proc.stderr


def test_serving_starts_with_a_key_so_the_refusals_above_can_pass():
    proc = wsgi(DJANGO_SECRET_KEY=STRONG_KEY, DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode == 0, proc.stderr


def test_deploy_check_fails_without_a_key():
    proc = manage("check", "--deploy", "--fail-level", "WARNING", DJANGO_ALLOWED_HOSTS="headroom.example")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "(security.W009)" in proc.stdout + proc.stderr
