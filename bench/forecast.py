"""Forecast job vs statsforecast alone on the same data and the same fits, interleaved, in one process.

N series × D days of hourly demand with daily and weekly cycles are written as telemetry rollups
into a scratch SQLite database. Then, round by round, (1) the whole job runs — history read, the
lead-time backtest of every candidate (issue 32: daily-mean fits, the naive and level-shift paths),
selection at the horizons, the guard, bands, realised-accuracy feedback, pool placement, results
written — and (2) statsforecast alone makes the same fits: the same cross_validation of the fitted
candidates over the same origins and their final forecasts. The two alternate with the order swapped
each round, so a change in the machine's load lands on both; the load average is printed beside
every timing. The ratio is the median of the rounds' job ÷ raw (bound ≤ BOUND, docs/forecasting.md).
Not a timed test.

    .venv/bin/python bench/forecast.py [--series 10] [--days 252] [--rounds 4]
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
from typing import Any

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


def fitted_values(series: list) -> list:
    """What the job fits on: after an old step, re-anchored after a young one. Computed outside the timing:
    it is the job's own work (change points), so it must not be counted on statsforecast's side."""
    from forecasting import change_points
    from forecasting.candidates import since_break

    values = []
    for s in series:
        v = since_break(s.values)
        step = change_points.detect(v)
        values.append(change_points.reanchor(v, step) if step is not None else v)
    return values


def raw_statsforecast(values: list, horizon_h: int) -> None:
    """The same statsforecast fits directly: the backtest's cross-validation of the fitted candidates on
    the daily means and their final forecasts; no reading, change points, custom candidates, guard, bands
    or writing."""
    from statsforecast import StatsForecast
    from statsforecast.models import SeasonalNaive

    from forecasting import selection
    from forecasting.candidates import FITTED, build_daily

    groups: dict = {}
    for v in values:
        p = selection.lead_plan(len(v))
        if p is not None:
            groups.setdefault(p, []).append(v)
    for p, vs in groups.items():
        sf = StatsForecast(
            models=[build_daily(n) for n in FITTED], freq=1, fallback_model=SeasonalNaive(season_length=7)
        )
        sf.cross_validation(h=p.weeks * 7, df=selection.daily_frame(vs), n_windows=len(p.origins), step_size=7)
    sf = StatsForecast(models=[build_daily(n) for n in FITTED], freq=1, fallback_model=SeasonalNaive(season_length=7))
    sf.forecast(df=selection.daily_frame(values), h=-(-horizon_h // 24))


# The documented bound (docs/forecasting.md, issue 47): the job with its selection (every candidate backtested,
# the guard, bands, the naive check, reading and writing) at most 1.5 × the same statsforecast fits alone.
BOUND = 1.5


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=10)
    ap.add_argument("--days", type=int, default=252)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--n-jobs", type=int, default=1)
    # Series per chunk (one Celery task each). 50 is what a deployment with a broker runs (config/settings.py:
    # FORECAST_CHUNK_SIZE); the embedded default (no broker) runs chunks of 3 so a run's progress moves every few
    # series, and pays a claim, a read, a write and two statsforecast calls per 3 series for it.
    ap.add_argument("--chunk-size", type=int, default=50)
    args = ap.parse_args()

    scratch = tempfile.mkdtemp(prefix="bench-forecast-")
    os.environ["SQLITE_PATH"] = str(Path(scratch) / "bench.sqlite3")
    for var in ("DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL"):
        os.environ.pop(var, None)  # embedded default: SQLite, Celery inline
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["FORECAST_RUN_IN_BACKGROUND"] = "0"  # the run inline, so its time is the job's
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from forecasting import demand, history, pipeline, selection, services
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
    pipeline.forecast_batch(series[:1], horizon_h=demand.WEEK)

    params = {"end": END.isoformat(), "lookback_days": args.days, "batch_size": 100, "n_jobs": args.n_jobs,
              "chunk_size": args.chunk_size}  # fmt: skip
    print(f"the job in chunks of {args.chunk_size} series (--chunk-size; a broker's deployment runs 50)")

    # The job's own statsforecast calls timed inside it (a wrapper on the one function that makes them): the
    # job's time less these is its own work, and these beside the raw side's show whether the same fits cost
    # the job more (data layout, call overhead) than statsforecast alone.
    fit_s = [0.0]
    fitted_daily = selection.fitted_daily

    def timed_fits(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fitted_daily(*a, **kw)
        finally:
            fit_s[0] += time.perf_counter() - t0

    selection.fitted_daily = timed_fits

    def job() -> float:
        fit_s[0] = 0.0
        t0 = time.perf_counter()
        run = services.forecast_run_request(parameters=params)
        took = time.perf_counter() - t0
        run = ForecastRun.objects.get(pk=run.pk)
        assert run.status == "succeeded", (run.status, run.error)  # noqa: S101
        assert run.series_count == args.series  # noqa: S101
        return took

    values = fitted_values(series)

    def raw() -> float:
        t0 = time.perf_counter()
        raw_statsforecast(values, horizon)
        return time.perf_counter() - t0

    job_s, raw_s, ratios, fits = [], [], [], []
    for r in range(args.rounds):
        # Interleaved, the order swapped each round, so a change in the machine's load lands on both.
        order = (("job", job), ("raw", raw)) if r % 2 == 0 else (("raw", raw), ("job", job))
        took = {}
        for name, fn in order:
            print(f"round {r + 1}: {name} ... {load()}", flush=True)
            took[name] = fn()
            if name == "job":
                fits.append(fit_s[0])
        job_s.append(took["job"])
        raw_s.append(took["raw"])
        ratios.append(took["job"] / took["raw"])
        print(
            f"round {r + 1}: job {took['job']:.2f} s (its statsforecast calls {fits[-1]:.2f} s, its own work "
            f"{took['job'] - fits[-1]:.2f} s), raw {took['raw']:.2f} s, ratio {ratios[-1]:.2f}x  {load()}",
            flush=True,
        )

    methods = sorted(set(ForecastSeries.objects.values_list("method", flat=True)))
    print(f"series {args.series}, history {hours} h, winners {methods}, rounds {args.rounds}")
    print(
        f"job (read + backtest + select + guard + bands + feedback + write): {statistics.median(job_s):8.2f} s median"
    )
    print(
        f"statsforecast alone (the same cross_validation and forecast fits): {statistics.median(raw_s):8.2f} s median"
    )
    print(f"the job's own statsforecast calls inside it:                     {statistics.median(fits):8.2f} s median")
    print(
        f"ratio job / statsforecast, median of the rounds: {statistics.median(ratios):.2f}x  (bound <= {BOUND:.1f}x)  {load()}"
    )
    same = [f / r for f, r in zip(fits, raw_s, strict=True)]
    own = [(j - f) / r for j, f, r in zip(job_s, fits, raw_s, strict=True)]
    print(
        f"the job's statsforecast calls / statsforecast alone: {statistics.median(same):.2f} median "
        f"({', '.join(f'{x:.2f}' for x in same)}); the job's own work / statsforecast alone: "
        f"{statistics.median(own):.2f} median ({', '.join(f'{x:.2f}' for x in own)})"
    )


if __name__ == "__main__":
    main()
