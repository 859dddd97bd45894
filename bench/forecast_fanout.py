"""A forecast run fanned out in chunks: one Celery worker vs two, interleaved (issue 21.2).

N series × D days of hourly demand are written as hour rollups into a PostgreSQL database of the
bench's own (dropped and created again, default `bench_forecast_fanout`), with a throwaway
redis-server as the broker. Then, round by round, the same run is timed on one worker and on two
(1, 2, 1, 2, …): real `celery worker` processes (prefork, one pool process each), started fresh for
each round and warmed by one untimed run, with every math library pinned to one thread (OMP, OpenBLAS, MKL, numba), so two workers
mean two cores, not two thread pools fighting over them. A run's time is the database's own
created_at → finished_at: request, plan, every chunk, the finishing step. The load average is
printed beside every timing and the ratio: the machine is shared, and a ratio measured under load
says so. Goal: two workers ≥ 1.5× one. Not a timed test.

    .venv/bin/python bench/forecast_fanout.py [--series 300] [--days 14] [--rounds 2] [--chunk-size 25]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

PINNED = dict.fromkeys(
    ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"), "1"
)
# statsforecast's numba functions compiled once to disk, not in every fresh worker process.
PINNED["NIXTLA_NUMBA_CACHE"] = "1"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def fresh_database(url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(url, dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    base = url.rsplit("/", 1)[0]
    return f"{base}/{name}"


def start_workers(n: int, env: dict[str, str], logdir: Path, tag: str) -> list[subprocess.Popen]:
    procs, logs = [], []
    for i in range(n):
        log = logdir / f"{tag}-w{i}.log"
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [str(ROOT / ".venv/bin/celery"), "-A", "config", "worker", "--pool=prefork", "--concurrency=1",
                 "-n", f"bench{i}-{tag}@%h", "--without-mingle", "--without-gossip", "-l", "INFO"],
                cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
            )
        )  # fmt: skip
    while not all("ready." in p.read_text() for p in logs if p.exists()) or not all(p.exists() for p in logs):
        if any(proc.poll() is not None for proc in procs):
            raise SystemExit(f"a worker exited: see {logdir}")
        time.sleep(0.2)
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    import signal

    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    for p in procs:
        p.wait()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=300)
    ap.add_argument("--days", type=int, default=14)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=25)
    ap.add_argument("--pg", default=os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/postgres"))
    ap.add_argument("--db", default="bench_forecast_fanout")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench-fanout-"))
    from tests.servers.redis import RedisServer

    broker = RedisServer(scratch)
    broker.start()
    db_url = fresh_database(args.pg, args.db)
    env = {
        **os.environ,
        **PINNED,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": db_url,
        "CELERY_BROKER_URL": broker.url,
    }
    env.pop("REDIS_URL", None)
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from forecast import write_rollups

    from forecasting import pipeline
    from forecasting.history import DemandSeries
    from forecasting.models import ForecastRun
    from forecasting.services import forecast_run_request
    from tests import factories as f
    from tests.forecasting.helpers import END, cycles_cu

    f.build_fleet()
    t0 = time.perf_counter()
    write_rollups(args.series, args.days * 24)
    print(f"wrote {args.series} series × {args.days * 24} h of rollups in {time.perf_counter() - t0:.1f} s", flush=True)
    # Fill numba's disk cache here, so no worker's first chunk compiles.
    pipeline.forecast_batch(
        [DemandSeries("w", "m", "r", END, cycles_cu(args.days * 24, base=40, seed=0))], horizon_h=168
    )

    def finished(run: ForecastRun) -> ForecastRun:
        while not ForecastRun.objects.get(pk=run.pk).is_done:
            time.sleep(0.2)
        return ForecastRun.objects.get(pk=run.pk)

    params = {"end": END.isoformat(), "lookback_days": args.days, "chunk_size": args.chunk_size, "batch_size": 100}
    times: dict[int, list[float]] = {1: [], 2: []}
    try:
        for r in range(args.rounds):
            # Interleaved, the order swapped each round: a change in the machine's load lands on both sides.
            for n in (1, 2) if r % 2 == 0 else (2, 1):
                procs = start_workers(n, env, scratch, f"r{r}n{n}")
                try:
                    # An untimed run first: each fresh pool process loads numba's compiled code on its
                    # first chunk, a fixed cost per process that would otherwise count against two workers.
                    warm = finished(forecast_run_request(parameters=params))
                    before = load()
                    run = finished(forecast_run_request(parameters=params))
                finally:
                    stop(procs)
                assert run.status == "succeeded", run.error  # noqa: S101
                assert (run.series_count, run.results_written) == (args.series, 1)  # noqa: S101
                took = (run.finished_at - run.created_at).total_seconds()
                times[n].append(took)
                warm_s = (warm.finished_at - warm.created_at).total_seconds()
                print(
                    f"round {r + 1}: {n} worker{'s' if n > 1 else ''}: {took:.1f} s (warm-up run {warm_s:.1f} s) "
                    f"({run.chunks_total} chunks)  before: {before}  after: {load()}",
                    flush=True,
                )
    finally:
        broker.stop()
    one, two = statistics.median(times[1]), statistics.median(times[2])
    print(
        f"series {args.series}, history {args.days * 24} h, chunk size {args.chunk_size}, rounds {args.rounds}: "
        f"one worker {one:.1f} s, two workers {two:.1f} s (medians): speed-up {one / two:.2f}× (goal ≥ 1.5×)  {load()}"
    )


if __name__ == "__main__":
    main()
