"""Issue 38: settings refuse to load when dedup keys would be forgotten before the timestamp window
closes (a replayed event could then be stored twice). Each case imports config.settings in a fresh
interpreter (settings are read once per process). Mutation M6 deletes the refusal."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "TELEMETRY_"))}
    return subprocess.run(
        [sys.executable, "-c", "import config.settings"],
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,  # a guard against a hung child, not a performance limit
    )


def test_dedup_retention_one_day_short_of_the_window_refuses_to_start():
    # a 7-day window (TELEMETRY_TS_MAX_AGE_S) needs 7 days of dedup keys; 6 is refused by name
    proc = load_settings(TELEMETRY_TS_MAX_AGE_S=str(7 * 86400), TELEMETRY_DEDUP_RETENTION_DAYS="6")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "django.core.exceptions.ImproperlyConfigured: TELEMETRY_DEDUP_RETENTION_DAYS must cover TELEMETRY_TS_MAX_AGE_S"
    )


def test_dedup_retention_equal_to_the_window_starts():
    # the negative control: the same command loads when the keys cover the window exactly
    proc = load_settings(TELEMETRY_TS_MAX_AGE_S=str(7 * 86400), TELEMETRY_DEDUP_RETENTION_DAYS="7")
    assert (proc.returncode, proc.stderr) == (0, "")
