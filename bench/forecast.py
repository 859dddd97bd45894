"""Forecast job vs statsforecast alone on the same data and the same fits, interleaved, in one process.

N series × D days of hourly demand with daily and weekly cycles are written as telemetry rollups
into a scratch SQLite database. Then, round by round, (1) the whole job runs — history read,
cross-validation of every candidate over the backtest origins, selection, forecast with each
series' winner, guard, scenarios, pool placement, results written — and (2) statsforecast alone
makes the same fits: one cross_validation call with the same candidates and origins, and one
forecast call per winning method over the series that chose it. The two alternate so a change in
the machine's load lands on both; the load average is printed beside every timing. The ratio is
median job ÷ median raw (goal ≤ 1.5×). Not a timed test.

    .venv/bin/python bench/forecast.py [--series 10] [--days 35] [--rounds 2] [--n-jobs 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
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
    from tests.forecasting.helpers import END, cycles_cu

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
            # A trend on every third series, so both the drift and the no-trend paths run.
            cu = cycles_cu(hours, base=40 + i % 50, trend_per_week=0.03 if i % 3 == 0 else 0.0, seed=i)
            rows = []
            for h, v in enumerate(cu):
                row = list(template)
                row[at["bucket"]] = buckets[h]
                row[at["tenant"]] = f"t{i:03d}"
                row[at["estimated_wt"]] = float(v) * 1000 * 3600  # R = 1000 wt/s per CU in the test fleet
                rows.append(row)
            cur.executemany(sql, rows)


def raw_statsforecast(series: list, winners: list[str], horizon: int, n_jobs: int) -> None:
    """The same fits through statsforecast directly: no reading, selection, guard or writing."""
    from statsforecast import StatsForecast
    from statsforecast.models import SeasonalNaive

    from forecasting import selection
    from forecasting.candidates import DAY, build

    windows, names = selection.plan(len(series[0].values))  # type: ignore[misc]
    fallback = SeasonalNaive(season_length=DAY)
    sf = StatsForecast(models=[build(n) for n in names], freq="h", n_jobs=n_jobs, fallback_model=fallback)
    sf.cross_validation(
        h=selection.H, df=selection.frame(series), n_windows=windows, step_size=selection.H, level=selection.LEVELS
    )
    for method in sorted(set(winners)):
        sub = [s for s, w in zip(series, winners, strict=True) if w == method]
        sf = StatsForecast(models=[build(method)], freq="h", n_jobs=n_jobs, fallback_model=fallback)
        sf.forecast(df=selection.frame(sub), h=horizon, level=selection.LEVELS)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=10)
    ap.add_argument("--days", type=int, default=35)
    ap.add_argument("--rounds", type=int, default=2)
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
    from forecasting.models import ForecastRun, ForecastSeries
    from tests import factories as f
    from tests.forecasting.helpers import END

    f.build_fleet()
    hours = args.days * 24
    t0 = time.perf_counter()
    write_rollups(args.series, hours)
    print(f"wrote {args.series} series × {hours} h of rollups in {time.perf_counter() - t0:.1f} s")
    series = history.demand_series(start=END - timedelta(days=args.days), end=END)
    horizon = services.HORIZON_WEEKS * demand.WEEK
    # Warm-up outside every timing: imports and first-call (JIT) costs land on neither side.
    demand.forecast_batch(series[:1], horizon_h=demand.WEEK)

    params = {"end": END.isoformat(), "lookback_days": args.days, "batch_size": 100, "n_jobs": args.n_jobs}
    job_s, raw_s = [], []
    for r in range(args.rounds):
        print(f"round {r + 1}: job ... {load()}", flush=True)
        t0 = time.perf_counter()
        run = services.forecast_run_request(parameters=params)
        job_s.append(time.perf_counter() - t0)
        run = ForecastRun.objects.get(pk=run.pk)
        assert run.status == "succeeded", run.error  # noqa: S101
        assert run.series_count == args.series  # noqa: S101
        # The raw side fits the winners the job chose (guard fallbacks included): the same fits.
        winners = dict(ForecastSeries.objects.filter(run=run).values_list("tenant_slug", "method"))
        print(f"round {r + 1}: job {job_s[-1]:.1f} s; raw ... {load()}", flush=True)
        t0 = time.perf_counter()
        raw_statsforecast(series, [winners[s.tenant] for s in series], horizon, args.n_jobs)
        raw_s.append(time.perf_counter() - t0)
        print(f"round {r + 1}: raw {raw_s[-1]:.1f} s, ratio {job_s[-1] / raw_s[-1]:.2f}×  {load()}", flush=True)

    methods = sorted(set(winners.values()))
    print(f"series {args.series}, history {hours} h, winners {methods}, n_jobs {args.n_jobs}, rounds {args.rounds}")
    print(
        f"job (read + cross-validate + select + forecast + guard + scenarios + write): {statistics.median(job_s):8.1f} s median"
    )
    print(
        f"statsforecast alone (the same cross_validation and forecast fits):        {statistics.median(raw_s):8.1f} s median"
    )
    print(
        f"ratio job / statsforecast: {statistics.median(job_s) / statistics.median(raw_s):.2f}×  (goal ≤ 1.50×)  {load()}"
    )


if __name__ == "__main__":
    main()
