"""Forecast job vs statsforecast alone on the same data, in one process.

300 series × 60 days of hourly demand are written as telemetry rollups into a scratch SQLite
database; then (1) the whole job runs — history read, backtest, 26-week forecast, scenarios, pool
mapping, results written — and (2) statsforecast fits the same models on the same frame directly,
with the job's own StatsForecast calls (backtest + forecast) but none of its reading or writing.
Prints both wall times and the ratio (goal ≤ 1.2×). Not a timed test.

    .venv/bin/python bench/forecast.py [--series 300] [--days 60] [--n-jobs 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--n-jobs", type=int, default=1)
    args = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="bench-forecast-")
    os.environ["SQLITE_PATH"] = str(Path(scratch) / "bench.sqlite3")
    for var in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
        os.environ.pop(var, None)  # embedded default: SQLite, Celery inline
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from django.db import transaction

    from forecasting import demand, history, services
    from forecasting.models import ForecastRun
    from tests import factories as f
    from tests.forecasting.helpers import END, daily_cu, write_demand

    f.build_fleet()
    hours = args.days * 24
    t0 = time.perf_counter()
    with transaction.atomic():
        for i in range(args.series):
            write_demand(
                tenant=f"t{i:03d}",
                model="llama-test",
                region="us-test",
                cu=daily_cu(hours, base=40 + i % 50, amp=15, noise=3, seed=i),
                r=1000,
            )
    print(f"wrote {args.series} series × {hours} h of rollups in {time.perf_counter() - t0:.1f} s")

    # statsforecast alone: the same frames and the same models, one call each over all series.
    series = history.demand_series(start=END - timedelta(days=args.days), end=END)
    method = demand.method_for(hours)
    train = demand._frame(series, cut=demand.BACKTEST_H)
    full = demand._frame(series)
    # Warm-up outside both timings: imports and first-call costs land on neither side.
    demand.forecast_batch(series[:2], horizon_h=demand.WEEK)
    t0 = time.perf_counter()
    demand._run(method, train, demand.BACKTEST_H, args.n_jobs, baseline=True)
    demand._run(method, full, services.HORIZON_WEEKS * demand.WEEK, args.n_jobs, baseline=False)
    raw_s = time.perf_counter() - t0

    params = {"end": END.isoformat(), "lookback_days": args.days, "batch_size": 100, "n_jobs": args.n_jobs}
    t0 = time.perf_counter()
    run = services.forecast_run_request(parameters=params)
    job_s = time.perf_counter() - t0
    run = ForecastRun.objects.get(pk=run.pk)
    assert run.status == "succeeded", run.error
    assert run.series_count == args.series

    print(f"series {args.series}, history {hours} h, method {method}, n_jobs {args.n_jobs}")
    print(f"job (read + backtest + forecast + scenarios + write): {job_s:8.1f} s")
    print(f"statsforecast alone (backtest + forecast fits):        {raw_s:8.1f} s")
    print(f"ratio job / statsforecast: {job_s / raw_s:.2f}×  (goal ≤ 1.20×)")


if __name__ == "__main__":
    main()
