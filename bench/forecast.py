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


def write_rollups(n_series: int, hours: int) -> None:
    """One admit rollup per series and hour, inserted with executemany: model instances with ~80
    histogram columns each make bulk_create the slowest part of the set-up by far."""
    from django.db import connection, transaction

    from telemetry.models import HourRollup
    from tests.forecasting.helpers import END, daily_cu

    fields = [fl for fl in HourRollup._meta.concrete_fields if not fl.primary_key]
    cols = ", ".join(connection.ops.quote_name(fl.column) for fl in fields)
    sql = f"INSERT INTO {HourRollup._meta.db_table} ({cols}) VALUES ({', '.join(['%s'] * len(fields))})"
    # Prepare the ~80 default values once; per row only the key and the weighted tokens change.
    template = [fl.get_db_prep_save(fl.get_default(), connection) for fl in fields]
    at = {fl.attname: i for i, fl in enumerate(fields)}
    bucket = HourRollup._meta.get_field("bucket")
    fixed = {
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "decision": "admit",
        "requests": 1,
    }
    for name, value in fixed.items():
        template[at[name]] = value
    start = END - timedelta(hours=hours)
    buckets = [bucket.get_db_prep_save(start + timedelta(hours=h), connection) for h in range(hours)]
    with transaction.atomic(), connection.cursor() as cur:
        for i in range(n_series):
            cu = daily_cu(hours, base=40 + i % 50, amp=15, noise=3, seed=i)
            rows = []
            for h, v in enumerate(cu):
                row = list(template)
                row[at["bucket"]] = buckets[h]
                row[at["tenant"]] = f"t{i:03d}"
                row[at["estimated_wt"]] = float(v) * 1000 * 3600  # R = 1000 wt/s per CU in the test fleet
                rows.append(row)
            cur.executemany(sql, rows)


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

    from forecasting import demand, history, services
    from forecasting.models import ForecastRun
    from tests import factories as f
    from tests.forecasting.helpers import END

    f.build_fleet()
    hours = args.days * 24
    t0 = time.perf_counter()
    write_rollups(args.series, hours)
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
