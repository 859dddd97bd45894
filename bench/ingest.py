"""Event ingest: 1M events through telemetry.services.ingest_events (validation, dedup, minute rollups,
one transaction per batch; the hour and day rollups folded from the minutes, as beat and ingest do
every 30 s, with a final fold inside the clock) against a raw binary PostgreSQL COPY of the same rows
into a scratch table, measured in the same run. Goal: the service path at ≥ 0.5× COPY's events/s.

Fair by construction: both sides take the same events (one seed); COPY's table is the events table's
equivalent (its columns, defaults, identity and primary key) plus the dedup index ingest pays for;
COPY's rows are typed before its clock starts, ingest's batches are built before its own; the rounds
alternate which side runs first (6 rounds by default, even so that each order runs as often), each after a CHECKPOINT, with autovacuum off for both
tables. Printed per run: wall time, the load average before it, and the CPU this process and its
PostgreSQL backend spent (from /proc): where the time goes when the machine is shared.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/telemetry_bench .venv/bin/python bench/ingest.py [N] [BATCH] [ROUNDS]
(that URL is the default; the database is created and migrated if missing).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/telemetry_bench"
GOAL = 0.5
# Two days back, on the hour: inside ingest's plausible window (7 days back), as a live stream would be.
T0 = (datetime.now(UTC) - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)
TENANTS = [f"bench-{i}" for i in range(20)]
REASONS = ["QUOTA_EXCEEDED", "PLATFORM_CAPACITY", "RECLAIMED", "CONCURRENCY_LIMIT"]


def ensure_database(url: str) -> None:
    """CREATE DATABASE if it does not exist (connecting to the server's `postgres` database)."""
    import psycopg

    u = urlparse(url)
    name = u.path.lstrip("/")
    admin = u._replace(path="/postgres").geturl()
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


def setup_django() -> None:
    url = os.environ.setdefault("DATABASE_URL", DEFAULT_URL)
    if not url.startswith("postgres"):
        sys.exit("bench/ingest.py compares against PostgreSQL COPY: DATABASE_URL must be postgres://…")
    ensure_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def catalogue() -> None:
    from entitlements.models import Region, ServedModel, Tenant

    ServedModel.objects.get_or_create(
        slug="bench-model",
        defaults={
            "name": "bench",
            "r_wt_per_s": 1000,
            "kv_bytes_per_token": 1,
            "context_length": 8192,
            "weights_gb": 1,
        },
    )
    Region.objects.get_or_create(slug="bench-region", defaults={"name": "bench"})
    for t in TENANTS:
        Tenant.objects.get_or_create(slug=t, defaults={"name": t})


def events(n: int, seed: int = 1):
    """The same n events for both paths: what admission reports, ~1,000/s over ~17 minutes for 1M."""
    rng = random.Random(seed)
    for i in range(n):
        decision = rng.choice(("admit", "admit", "throttle", "complete"))
        e = {
            "event_id": f"b{i}" + (":complete" if decision == "complete" else ""),
            # a live stream: ~1,000 decisions/s in time order, with up to 5 s of reporting jitter
            "ts": (T0 + timedelta(milliseconds=i + rng.randrange(-5000, 5000))).isoformat(),
            "tenant": rng.choice(TENANTS),
            "model": "bench-model",
            "region": "bench-region",
            "traffic_class": rng.choice(("reserved", "shared", "best_effort")),
            "decision": decision,
            "estimated_wt": float(rng.randrange(1, 5000)),
            "prompt_tokens": rng.randrange(0, 4000),
        }
        if decision == "throttle":
            e["reason"] = rng.choice(REASONS)
        elif decision == "complete":
            e.update(
                actual_wt=float(rng.randrange(0, 5000)),
                output_tokens=rng.randrange(0, 900),
                ttft_ms=float(rng.randrange(5, 5000)),
                e2e_ms=float(rng.randrange(100, 60000)),
                slo_met=rng.random() < 0.9,
                status="ok",
            )
        yield e


def batches(n: int, size: int):
    batch = []
    for e in events(n):
        batch.append(e)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def reset() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "TRUNCATE telemetry_admissionevent, telemetry_eventkey, telemetry_minuterollup, telemetry_hourrollup, "
            "telemetry_dayrollup, telemetry_rollupbacklog"
        )
        cur.execute("DROP TABLE IF EXISTS bench_copy_events")
        # the same columns and defaults as the real table, and the dedup index ingest pays for (on PostgreSQL
        # it lives on telemetry_eventkey, since the events table is partitioned): COPY pays for one too
        cur.execute("CREATE TABLE bench_copy_events (LIKE telemetry_admissionevent INCLUDING ALL)")
        cur.execute("CREATE UNIQUE INDEX IF NOT EXISTS bench_copy_events_dedup ON bench_copy_events (source, event_id)")
        cur.execute("VACUUM ANALYZE telemetry_admissionevent")
        # Neither run may pay for the other's background work: autovacuum of a freshly filled table
        # takes one of this machine's two cores, so it is off for both tables while they are measured.
        for table in (*_leaves(cur, "telemetry_admissionevent"), "bench_copy_events"):
            cur.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")


def _leaves(cur, table: str) -> list[str]:
    """The tables that hold rows: a partitioned table's partitions (it takes no storage options itself)."""
    cur.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [table])
    return [r[0] for r in cur.fetchall()] or [table]


def quiesce() -> None:
    """Flush the previous run's dirty pages before the next clock starts (the same for both runs)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("CHECKPOINT")


def restore() -> None:
    from django.db import connection

    with connection.cursor() as cur:
        for table in _leaves(cur, "telemetry_admissionevent"):
            cur.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")
        cur.execute("DROP TABLE IF EXISTS bench_copy_events")


def _backend_cpu() -> float:
    """CPU seconds the server process of this connection has used (same machine: /proc), 0 if unreadable."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Cpu:
    """CPU seconds of this process (all threads) and of its server process over a block."""

    def __enter__(self) -> Cpu:
        self.py, self.db = time.process_time(), _backend_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.py, self.db = time.process_time() - self.py, _backend_cpu() - self.db


def run_service(n: int, size: int) -> tuple[float, Cpu, int]:
    from telemetry.fold import fold
    from telemetry.services import ingest_events

    pending = list(batches(n, size))  # generation is not ingest: build batches before the clock starts
    accepted = 0
    with Cpu() as cpu:
        t = time.perf_counter()
        for b in pending:
            r = ingest_events(source="bench", events=b)
            assert not r.errors, r.errors[:3]
            accepted += r.accepted
        fold()  # the hour and day rollups caught up, inside the clock: "rollups included"
        took = time.perf_counter() - t
    return took, cpu, accepted


def run_copy(n: int) -> tuple[float, Cpu]:
    """Binary COPY of the same rows, already typed (what ingest stores), no validation and no rollups."""
    from django.db import connection

    from telemetry.services import EVENT_COLUMNS

    now = datetime.now(tz=UTC)
    rows = []
    for e in events(n):
        rows.append(
            (
                "bench", e["event_id"], datetime.fromisoformat(e["ts"]), now, e["tenant"], "", e["model"], e["region"],
                e["traffic_class"], None, e["decision"], e.get("reason", ""), "", e["estimated_wt"],
                e.get("actual_wt"), e["prompt_tokens"], 0, e.get("output_tokens", 0), e.get("ttft_ms"),
                e.get("e2e_ms"), e.get("slo_met"), e.get("status", ""), e.get("in_flight"), e.get("served_from"),
            )
        )  # fmt: skip
    types = [
        "text", "text", "timestamptz", "timestamptz", "text", "text", "text", "text", "text", "uuid", "text", "text",
        "text", "float8", "float8", "int8", "int8", "int8", "float8", "float8", "bool", "text", "int4", "text",
    ]  # fmt: skip
    cols = ", ".join(EVENT_COLUMNS)
    connection.ensure_connection()
    raw = connection.connection
    with Cpu() as cpu:
        t = time.perf_counter()
        with raw.cursor() as cur, cur.copy(f"COPY bench_copy_events ({cols}) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(types)
            for r in rows:
                copy.write_row(r)
        raw.commit()
        took = time.perf_counter() - t
    return took, cpu


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 6
    setup_django()
    catalogue()
    from telemetry.models import DayRollup, HourRollup, MinuteRollup

    ratios = []
    cpus: dict[str, list[Cpu]] = {"copy": [], "service": []}
    for r in range(rounds):
        # Interleaved, the order swapped each round: whichever side runs second inherits the first's
        # dirty pages and autovacuum debt, so neither side always pays for it.
        reset()
        took: dict[str, float] = {}
        for side in ("copy", "service") if r % 2 == 0 else ("service", "copy"):
            quiesce()
            before = f"load {os.getloadavg()[0]:.2f}"
            if side == "copy":
                took["copy"], cpu = run_copy(n)
            else:
                took["service"], cpu, accepted = run_service(n, size)
            cpus[side].append(cpu)
            print(
                f"round {r + 1}: {side:7s} {took[side]:8.2f} s, CPU {cpu.py:.2f} s Python + {cpu.db:.2f} s server "
                f"({before} before)",
                flush=True,
            )
        minutes = MinuteRollup.objects.count()
        hour_total = sum(HourRollup.objects.values_list("requests", flat=True))
        total = sum(DayRollup.objects.values_list("requests", flat=True))
        if total != accepted or hour_total != accepted or accepted != n:
            restore()
            sys.exit(
                f"round {r + 1}: rollup totals do not match the events ({hour_total:,} / {total:,} / {accepted:,})"
            )
        ratios.append(took["copy"] / took["service"])  # events/s of the service ÷ events/s of COPY
        print(
            f"round {r + 1}: raw binary COPY {n / took['copy']:,.0f} events/s, ingest_events (+rollups) "
            f"{n / took['service']:,.0f} events/s: ratio {ratios[-1]:.2f}; minute rollup rows {minutes:,}; "
            f"hour/day-rollup requests {hour_total:,} / {total:,}",
            flush=True,
        )
    restore()
    one, five, fifteen = os.getloadavg()
    print(f"events: {n:,} in batches of {size:,}, {rounds} rounds, the order swapped each round")
    print(
        f"ratio service/COPY: median {statistics.median(ratios):.2f} (rounds {', '.join(f'{x:.2f}' for x in ratios)}; goal ≥ {GOAL})"
    )
    # The side that runs first in a round has read slower on this machine: each order's own median, so
    # an odd number of rounds cannot tilt the figure toward one order.
    first = {"COPY first": ratios[0::2], "ingest first": ratios[1::2]}
    print("by order: " + "; ".join(f"{k} {statistics.median(v):.2f}" for k, v in first.items() if v))
    cpu_total = {side: sum(c.py + c.db for c in runs) for side, runs in cpus.items()}
    print(f"CPU ratio (COPY's CPU ÷ ingest's, both processes): {cpu_total['copy'] / cpu_total['service']:.2f}")
    for side, runs in cpus.items():
        py, db = statistics.median(c.py for c in runs), statistics.median(c.db for c in runs)
        print(
            f"CPU per 1,000 events, {side}: {1000 * py / n * 1000:.1f} ms Python + {1000 * db / n * 1000:.1f} ms server (medians)"
        )
    print(f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
