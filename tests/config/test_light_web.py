"""The web process renders pages without loading the forecaster's heavy libraries: statsforecast
brings pandas, scipy and pyarrow (hundreds of MB and seconds of import) and only forecast runs need
them (forecasting imports them on use)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_home_and_planning_pages_render_without_pandas_scipy_pyarrow_or_statsforecast(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_URL", "REDIS_URL", "CELERY_"))}
    env |= {"DJANGO_SETTINGS_MODULE": "config.settings", "DJANGO_DEBUG": "1", "SQLITE_PATH": str(tmp_path / "db")}
    done = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("light_web_child.py"))],
        cwd=ROOT, env=env | {"PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["statuses"] == {"/": 200, "/planning/": 200}
    assert out["heavy"] == []
