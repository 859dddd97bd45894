"""Reconciliation's read of one scope with N recorded events in its window (issue 45.1): the raw
events streamed as one binary COPY (telemetry.recorded, telemetry.recorded_pg), lumped by the server
when the minute rollups say more than MAX_EXACT, and the planning answer on them; beside it, on the same rows, a bare `SELECT count(*)` (the floor any read pays),
rounds interleaved with their order swapped. Prints each median, their ratio, the Python heap's peak
(tracemalloc: numpy's arrays included), the process's peak RSS and the load average.

The events are written once by PostgreSQL itself (generate_series): a 14-day window ending now, in
bursts of 50 requests inside 0.5 s every ~6 s (10 M rows by default), 2 % throttled for quota, and
their minute rollups.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/recorded_bench .venv/bin/python bench/recorded_replay.py [N] [ROUNDS]
"""

from __future__ import annotations

import os
import resource
import statistics
import sys
import time
import tracemalloc
import uuid
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/recorded_bench"
ENT = uuid.UUID("45454545-4545-4545-4545-454545454545")


def setup() -> None:
    import psycopg

    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("bench/recorded_replay.py reads with PostgreSQL's COPY: DATABASE_URL must be postgres://…")
    u = urlparse(url)
    with psycopg.connect(u._replace(path="/postgres").geturl(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [u.path.lstrip("/")]).fetchone():
            conn.execute(f'CREATE DATABASE "{u.path.lstrip("/")}"')
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def fill(n: int, start, end) -> None:  # noqa: ANN001
    from django.db import connection

    from telemetry import partitions

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM telemetry_admissionevent WHERE entitlement = %s", [ENT])
        if cur.fetchone()[0] == n:
            return
        cur.execute("DELETE FROM telemetry_admissionevent WHERE entitlement = %s", [ENT])
        if partitions.is_partitioned(cur):
            d = partitions.day_of(start)
            while d <= partitions.day_of(end):
                partitions.ensure_day(cur, d)
                d += timedelta(days=1)
        span = (end - start).total_seconds()
        bursts = n // 50
        cur.execute(
            """
            INSERT INTO telemetry_admissionevent
              (source, event_id, ts, received_at, tenant, project, model, region, traffic_class, entitlement,
               decision, reason, source_kind, estimated_wt, prompt_tokens, cached_prompt_tokens, output_tokens,
               status)
            SELECT 'bench', 'r' || i, ts, ts, 'bench', '', 'bench-model', 'bench-region', 'reserved', %s,
                   CASE WHEN i %% 50 = 49 THEN 'throttle' ELSE 'admit' END,
                   CASE WHEN i %% 50 = 49 THEN 'QUOTA_EXCEEDED' ELSE '' END,
                   '', 500 + (i %% 37) * 40, 400, 0, 0, ''
            FROM (SELECT i, %s::timestamptz + make_interval(secs => (i / 50) * %s + (i %% 50) * 0.01) AS ts
                  FROM generate_series(0, %s - 1) AS i) AS g
            """,
            [ENT, start, span / max(bursts, 1), n],
        )
        cur.execute("ANALYZE telemetry_admissionevent")


def minute_rollups(start, end) -> None:  # noqa: ANN001
    """The minute rollups ingest would have written beside the events (requests and wt per minute and
    decision; the other columns at their defaults): the reader asks them how many requests to expect."""
    from django.db import connection

    from telemetry.models import MinuteRollup

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM telemetry_minuterollup WHERE entitlement = %s", [str(ENT)])
        if cur.fetchone()[0]:
            return
        keys = ("tenant", "project", "model", "region", "traffic_class", "decision", "reason")
        exprs = {"bucket": "date_trunc('minute', ts)", "entitlement": "entitlement::text", "served_from": "''",
                 "requests": "count(*)", "estimated_wt": "sum(estimated_wt)"} | {k: k for k in keys}  # fmt: skip
        fields = [f for f in MinuteRollup._meta.concrete_fields if not f.primary_key]
        select = [exprs.get(f.column, str(f.get_default())) for f in fields]
        cur.execute(
            f"INSERT INTO telemetry_minuterollup ({', '.join(f.column for f in fields)}) "  # noqa: S608 - model metadata
            f"SELECT {', '.join(select)} FROM telemetry_admissionevent WHERE entitlement = %s AND ts >= %s AND ts < %s "
            f"GROUP BY date_trunc('minute', ts), entitlement, {', '.join(keys)}",
            [ENT, start, end],
        )


def entitlement():  # noqa: ANN201
    """An unsaved entitlement naming the bench scope: the reader needs its scope and model only."""
    from entitlements.models import Entitlement, Region, ServedModel, Tenant

    return Entitlement(
        uuid=ENT,
        tenant=Tenant(slug="bench"),
        model=ServedModel(slug="bench-model", r_wt_per_s=1000),
        region=Region(slug="bench-region"),
        traffic_class_id="reserved",
        project=None,
        cu=10,
    )


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    setup()
    from django.db import connection
    from django.utils import timezone

    from forecasting.peak_to_mean import planning_answer, recorded_workload

    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=14)
    t0 = time.perf_counter()
    fill(n, start, end)
    minute_rollups(start, end)
    print(f"events ready in {time.perf_counter() - t0:.1f} s ({n:,} in the window)")
    ent = entitlement()

    def read_and_plan() -> str:
        w = recorded_workload(ent, start, end)
        a = planning_answer(ent, w)
        return f"{len(w):,} replayed, {a.cu_to_buy} CU"

    def count() -> str:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM telemetry_admissionevent WHERE entitlement = %s AND ts >= %s AND ts < %s",
                [ENT, start, end],
            )
            return f"{cur.fetchone()[0]:,} rows"

    times: dict[str, list[float]] = {"replay": [], "count": []}
    peak = 0
    for r in range(rounds):
        order = [("replay", read_and_plan), ("count", count)]
        for name, fn in order if r % 2 == 0 else order[::-1]:
            tracemalloc.start()
            t = time.perf_counter()
            what = fn()
            times[name].append(time.perf_counter() - t)
            peak = max(peak, tracemalloc.get_traced_memory()[1]) if name == "replay" else peak
            tracemalloc.stop()
            print(f"round {r} {name}: {times[name][-1]:.2f} s ({what}) load {os.getloadavg()[0]:.2f}")
    rep, cnt = statistics.median(times["replay"]), statistics.median(times["count"])
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"median: read + plan {rep:.2f} s, count(*) {cnt:.2f} s, ratio {rep / cnt:.2f}; heap peak {peak / 2**20:.0f} MiB, "
        f"process peak RSS {rss:.0f} MiB; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
