"""Issue 16's goal on the demo: the chosen model's holdout error ≤ 1.1 × the best naive baseline's
on at least 80 % of series. Loads the demo fleet into a scratch SQLite database, seeds its eight
weeks of history, runs one forecast, and prints every series and the share. Not a timed test.

    .venv/bin/python bench/forecast_goal.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    os.environ["SQLITE_PATH"] = str(Path(tempfile.mkdtemp(prefix="forecast-goal-")) / "demo.sqlite3")
    for var in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
        os.environ.pop(var, None)  # embedded default: SQLite, Celery inline
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["FORECAST_RUN_IN_BACKGROUND"] = "0"  # the run inline: its series are read right after
    import django

    django.setup()
    from django.core.management import call_command

    from forecasting import selectors, services
    from forecasting.models import ForecastSeries

    call_command("migrate", verbosity=0)
    call_command("load_demo", verbosity=0)
    t0 = time.perf_counter()
    call_command("seed_history")
    print(f"seed_history: {time.perf_counter() - t0:.0f} s")
    t0 = time.perf_counter()
    run = services.forecast_run_request(parameters={})
    run.refresh_from_db()
    print(f"forecast run: {run.status} in {time.perf_counter() - t0:.0f} s {run.error[:300]}")
    ok = n = 0
    for s in ForecastSeries.objects.filter(run=run):
        naive = selectors.best_naive_holdout(s.candidates)
        good = s.holdout_error is not None and naive is not None and s.holdout_error <= 1.1 * naive
        n, ok = n + 1, ok + good
        print(
            f"{s.tenant_slug:10} {s.model:16} {s.region:9} {s.method:13} holdout {s.holdout_error} "
            f"best naive {naive} coverage {s.coverage} {'ok' if good else 'MISS'} {s.note}"
        )
    print(f"goal: {ok}/{n} = {ok / max(n, 1):.0%} of series within 1.1 × the best naive baseline (goal ≥ 80 %)")


if __name__ == "__main__":
    main()
