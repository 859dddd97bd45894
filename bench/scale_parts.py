"""Growth at 1×, 10× and 100× the demo (issue 19, items 2 and 3; issue 35.2 and 35.7): the admission
snapshot's refresh after one write, reserve throughput while entitlements are written, the operator's
home page and the usage partial, measured on the demo fleet plus synthetic entitlements in a database
of its own. Every synthetic entitlement is a scope of its own (`distinct-*` tenants, one project per
entitlement, spread over the demo pools): 10,000 entitlements are 10,000 distinct scopes.

The entitlement count is switched between rows of a table by two `.update()` statements (revoke or
restore synthetic rows), which is itself a signal-less write the snapshot must notice. The refresh
after one write (incremental: the written scope re-summed) is timed beside a full rebuild, in rounds
whose order swaps. Reserve throughput at 10,000 distinct scopes alternates blocks with no write and
blocks during which another thread, on its own connection, writes one entitlement per second (as the
portal would in another process); the order swaps each round and the load is printed per round.
Each round does so twice, once per place the check runs (ADMISSION_SNAPSHOT_BACKGROUND: `inline`, on
the request thread that finds it due, and `background`, on the refresher thread), the modes' order
swapping too; `--mode inline|background` measures one alone.

Run alone: DJANGO_DEBUG=1 .venv/bin/python bench/scale_parts.py [--reserve-only] [--rounds N] [--mode M]
(BENCH_SCALE_PARTS_DATABASE_URL, default below; REDIS_URL,
default db 8, keys under a prefix of its own, removed at the end); bench/scale.py runs it after its table.
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its admission.py would shadow the app

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_scale_parts_distinct"
DEFAULT_REDIS = "redis://127.0.0.1:6379/8"
SYNTH = "distinct-"  # tenant slug prefix of the synthetic entitlements (bench/scale.py owns "scale-")
GOAL_REBUILD_MS = 100.0
GOAL_RESERVE_RATIO = 0.9


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def setup() -> None:
    """Own database (created if missing), migrated, with the demo fleet loaded."""
    # Its own database whatever DATABASE_URL says (bench/scale.py, its parent, has another).
    os.environ["DATABASE_URL"] = os.environ.get("BENCH_SCALE_PARTS_DATABASE_URL", DEFAULT_URL)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(1, str(Path(__file__).resolve().parent))
    from ingest import ensure_database

    ensure_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    from demo.fleet import load_demo

    call_command("migrate", verbosity=0)
    load_demo()


def demo_count() -> int:
    from entitlements.models import Entitlement

    return Entitlement.objects.exclude(tenant__slug__startswith=SYNTH).filter(revoked_at__isnull=True).count()


def ensure_synthetic(n: int) -> None:
    """At least n synthetic entitlements, each in a project of its own (a distinct scope): best_effort
    (not sold) and reserved at 0.001 CU, round-robin over the demo pools and 100 tenants, open-ended,
    started a day ago. bulk_create: the triggers (history, snapshot counters) still fire per row."""
    from django.utils import timezone

    from entitlements.models import Entitlement, Pool, Project, Tenant

    have = Entitlement.objects.filter(tenant__slug__startswith=SYNTH).count()
    if have >= n:
        return
    Tenant.objects.bulk_create(
        [Tenant(slug=f"{SYNTH}{i:03d}", name=f"Scale {i}") for i in range(100)], ignore_conflicts=True
    )
    tenants = list(Tenant.objects.filter(slug__startswith=SYNTH).order_by("slug"))
    pools = list(Pool.objects.order_by("slug"))
    start = timezone.now() - timedelta(days=1)
    projects = Project.objects.bulk_create(
        [Project(tenant=tenants[i % len(tenants)], slug=f"d{i:05d}", name=f"D {i}") for i in range(have, n)]
    )
    rows = []
    for i, project in zip(range(have, n), projects, strict=True):
        p = pools[i % len(pools)]
        cls = "reserved" if i % 2 else "best_effort"
        rows.append(
            Entitlement(
                tenant=tenants[i % len(tenants)],
                project=project,
                model_id=p.model_id,
                region_id=p.region_id,
                pool=p,
                traffic_class_id=cls,
                starts_at=start,
                cu=Decimal("0.001"),
                max_prompt_tokens=8000,
                max_output_tokens=2000,
                prompt_p50=500,
                prompt_p95=4000,
                output_p50=200,
                output_p95=800,
                max_concurrency=8,
                ttft_p99_ms=2000,
                tpot_p99_ms=100,
            )  # fmt: skip
        )
    Entitlement.objects.bulk_create(rows, batch_size=2000)
    from django.db import connection

    with connection.cursor() as cur:  # fresh statistics, as autovacuum keeps them on a live table
        cur.execute("ANALYZE entitlements_entitlement")


def set_active(n_synthetic: int, *, demo: bool = True) -> None:
    """Exactly n synthetic entitlements active (lowest pks); the demo's own active or all revoked."""
    from django.db import transaction
    from django.utils import timezone

    from entitlements.models import Entitlement

    synth = Entitlement.objects.filter(tenant__slug__startswith=SYNTH)
    keep = list(synth.order_by("pk").values_list("pk", flat=True)[:n_synthetic])
    with transaction.atomic():
        synth.filter(pk__in=keep).update(revoked_at=None)
        synth.exclude(pk__in=keep).update(revoked_at=timezone.now())
        if not demo:
            Entitlement.objects.exclude(tenant__slug__startswith=SYNTH).exclude(pk=_bench_scope_pk()).update(
                revoked_at=timezone.now()
            )


_demo_active: list[int] = []


def _bench_scope_pk() -> int:
    """The one entitlement reserve throughput is measured on: the demo's first reserved grant."""
    from entitlements.models import Entitlement

    return Entitlement.objects.filter(pk__in=_demo_active, traffic_class_id="reserved").order_by("pk")[0].pk


def restore_demo() -> None:
    from entitlements.models import Entitlement

    Entitlement.objects.filter(pk__in=_demo_active).update(revoked_at=None)


def active_count() -> int:
    from entitlements.models import Entitlement

    return Entitlement.objects.filter(revoked_at__isnull=True).count()


def median_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def old_read() -> int:
    """What the snapshot read before issue 19: every active entitlement as a model instance with its
    tenant, project, model, region and class (about six instances a row), every 2 s."""
    from django.db.models import Q
    from django.utils import timezone

    from entitlements.models import Entitlement

    t = timezone.now()
    qs = Entitlement.objects.filter(revoked_at__isnull=True).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
    return len(list(qs.select_related("tenant", "project", "model", "region", "traffic_class")))


def refresh_after_write(full: bool) -> tuple[float, float]:
    """One entitlement written by `.update()` (no signal), then the refresh that makes the served snapshot
    show it, timed where it runs: under ADMISSION_SNAPSHOT_BACKGROUND (the served default) the refresher
    thread's tick (`params._refresh(own=False)`, which the request threads then merely read: timing
    `params.current()` there measured a read of the old snapshot, 0.0 ms), else the request thread's
    `params.current()`. Either way the counters and log id, the written scope re-summed, the snapshot
    rebuilt from the held table; the new snapshot's version is checked, so a refresh that did nothing
    cannot pass for a fast one. The refresher is stopped meanwhile (it would race the timed call).
    `full`: the snapshot dropped first, so the check reads every scope (what each write cost before
    issue 35.2, and what the fallback costs: always the request thread's). → (wall ms, CPU ms of this thread)."""
    from django.conf import settings
    from django.utils import timezone

    from admission import params
    from entitlements.models import Entitlement

    background = settings.ADMISSION_SNAPSHOT_BACKGROUND
    params.stop_refresher()
    settings.ADMISSION_SNAPSHOT_BACKGROUND = False  # nothing refreshes behind the clock
    try:
        params._next_check = 0.0
        before = params.current().version  # the previous round's write seen, untimed
        pk = Entitlement.objects.filter(revoked_at__isnull=True).order_by("-pk").values_list("pk", flat=True)[0]
        Entitlement.objects.filter(pk=pk).update(ends_at=timezone.now() + timedelta(days=3650))
        if full:
            params.invalidate()
        params._next_check = 0.0
        w, c = time.perf_counter(), time.thread_time()
        if background and not full:
            with params._lock:
                snap = params._refresh(params._current, time.monotonic(), own=False)
        else:
            snap = params.current()
        wall, cpu = (time.perf_counter() - w) * 1e3, (time.thread_time() - c) * 1e3
        Entitlement.objects.filter(pk=pk).update(ends_at=None)
        assert snap is params._current and snap.version > before, "the refresh did not publish a new snapshot"
    finally:
        settings.ADMISSION_SNAPSHOT_BACKGROUND = background
    return wall, cpu


def where_refresh() -> str:
    from django.conf import settings

    return ("the refresher thread's tick, ADMISSION_SNAPSHOT_BACKGROUND on" if settings.ADMISSION_SNAPSHOT_BACKGROUND
            else "the request thread's check, ADMISSION_SNAPSHOT_BACKGROUND off")  # fmt: skip


def rebuild_row(rounds: int = 6) -> tuple[tuple[float, float], tuple[float, float], float]:
    """Incremental and full refresh after a write, interleaved with the order swapped each round →
    ((median wall, CPU ms) incremental, (median wall, CPU ms) full, the old read's wall ms)."""
    inc, full = [], []
    for i in range(rounds):
        for f in (False, True) if i % 2 == 0 else (True, False):
            (full if f else inc).append(refresh_after_write(f))
    old = median_ms(old_read, max(1, rounds // 3))

    def med(runs: list[tuple[float, float]]) -> tuple[float, float]:
        return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)

    return med(inc), med(full), old


def page_ms(client, url: str, reps: int, **headers) -> float:
    def get() -> None:
        r = client.get(url, **headers)
        assert r.status_code == 200, (url, r.status_code)

    get()  # warm
    return median_ms(get, reps)


# ---- reserve throughput -----------------------------------------------------------------------


def reserve_setup():
    """The Redis backend with a key prefix of its own, events to a sink that drops them."""
    from admission import backends, events
    from admission.backends.redis import RedisBackend

    backend = RedisBackend(os.environ.get("REDIS_URL", DEFAULT_REDIS), prefix=f"scale-{uuid.uuid4().hex[:8]}:")
    backends.set_backend(backend)
    events.set_buffer(events.EventBuffer(lambda batch: {"accepted": len(batch)}, flush_s=0.5))
    return backend


def reserve_body():
    from entitlements.models import Entitlement

    e = Entitlement.objects.select_related("tenant", "project", "model", "region").get(pk=_bench_scope_pk())
    return {"tenant": e.tenant.slug, "project": e.project.slug if e.project_id else "", "model": e.model.slug,
            "region": e.region.slug, "traffic_class": "reserved", "prompt_tokens": 10, "max_output_tokens": 10}  # fmt: skip


def reserves_per_s(base: dict, seconds: float) -> tuple[float, float]:
    """Reserve + complete pairs on one scope for `seconds` (completes keep its bucket from emptying)
    → (pairs/s, p99 ms of a reserve, which carries any snapshot refresh the check interval triggers)."""
    from admission import params, services

    params.invalidate()
    params.current()  # the rebuild after the switch is not part of the steady state measured
    n = 0
    lat = []
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        t = time.perf_counter()
        d = services.reserve(services.parse_reserve({**base, "request_id": f"s{n}-{uuid.uuid4().hex[:6]}"}))
        lat.append(time.perf_counter() - t)
        assert d.status == 200, d.body
        services.complete(services.parse_complete({"reservation_id": d.body["reservation_id"], "prompt_tokens": 10,
                                                   "output_tokens": 10, "status": "ok"}))  # fmt: skip
        n += 1
    lat.sort()
    return n / (time.perf_counter() - t0), lat[int(0.99 * (len(lat) - 1))] * 1e3


class Writer(threading.Thread):
    """One entitlement write per second, on this thread's own database connection (as the portal
    writing in another process): the cu of a synthetic entitlement toggled by `.update()`."""

    def __init__(self, pks: list[int]) -> None:
        super().__init__(daemon=True)
        self.pks, self.halt, self.writes = pks, threading.Event(), 0

    def run(self) -> None:
        from django.db import connection

        from entitlements.models import Entitlement

        try:
            while True:
                pk = self.pks[self.writes % len(self.pks)]
                cu = Decimal("0.002") if (self.writes // len(self.pks)) % 2 == 0 else Decimal("0.001")
                Entitlement.objects.filter(pk=pk).update(cu=cu)
                self.writes += 1
                if self.halt.wait(1.0):
                    return
        finally:
            connection.close()


def set_mode(mode: str) -> None:
    """Where the snapshot's check runs: `background` (the refresher thread) or `inline`."""
    from django.conf import settings

    from admission import params

    params.stop_refresher()  # a direct assignment fires no setting_changed
    settings.ADMISSION_SNAPSHOT_BACKGROUND = mode == "background"


def reserve_rows(rounds: int = 6, seconds: float = 4.0, modes: tuple[str, ...] = ("inline", "background")) -> None:
    """At 10,000 distinct scopes: reserve blocks with no write and with one write per second,
    interleaved, the order swapping each round, per mode (their order swapping too); the ratio per
    round and its median."""
    from entitlements.models import Entitlement

    base = reserve_body()
    pks = list(
        Entitlement.objects.filter(tenant__slug__startswith=SYNTH, revoked_at__isnull=True)
        .order_by("pk")
        .values_list("pk", flat=True)[:50]
    )
    got: dict[str, dict[str, list]] = {m: {"quiet": [], "busy": [], "ratios": []} for m in modes}
    writes = 0

    def written() -> tuple[float, float]:
        nonlocal writes
        w = Writer(pks)
        w.start()
        try:
            return reserves_per_s(base, seconds)
        finally:
            w.halt.set()
            w.join()
            writes += w.writes

    print(f"reserve + complete, Redis, one scope, {active_count():,} entitlements active "
          f"({scope_count():,} distinct scopes), {seconds:.0f} s blocks, check runs {' vs '.join(modes)}:")  # fmt: skip
    for i in range(rounds):
        for mode in modes if i % 2 == 0 else modes[::-1]:
            set_mode(mode)
            if i % 2 == 0:
                a = reserves_per_s(base, seconds)
                b = written()
            else:
                b = written()
                a = reserves_per_s(base, seconds)
            g = got[mode]
            g["quiet"].append(a)
            g["busy"].append(b)
            g["ratios"].append(b[0] / a[0])
            print(f"  round {i + 1} {mode:<10} ({'quiet first' if i % 2 == 0 else 'writes first'}): no writes "
                  f"{a[0]:,.0f}/s (p99 {a[1]:.2f} ms), 1 write/s {b[0]:,.0f}/s (p99 {b[1]:.2f} ms), ratio "
                  f"{b[0] / a[0]:.2f}; {load()}")  # fmt: skip
    set_mode("background")
    for mode, g in got.items():
        q, w = g["quiet"], g["busy"]
        print(f"  median {mode:<10}: no writes {statistics.median(x[0] for x in q):,.0f}/s (p99 "
              f"{statistics.median(x[1] for x in q):.2f} ms), 1 write/s {statistics.median(x[0] for x in w):,.0f}/s "
              f"(p99 {statistics.median(x[1] for x in w):.2f} ms); ratio {statistics.median(g['ratios']):.2f} "
              f"(goal ≥ {GOAL_RESERVE_RATIO})")  # fmt: skip
    print(f"  {writes} writes; {load()}")


def scope_count() -> int:
    from admission import params

    return len(params.current().scopes)


def _reserve_report() -> int:
    set_active(10_000 - len(_demo_active))
    restore_demo()
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 6
    modes = (sys.argv[sys.argv.index("--mode") + 1],) if "--mode" in sys.argv else ("inline", "background")
    reserve_rows(rounds=rounds, modes=modes)
    return 0


def main() -> int:
    setup()
    from django.conf import settings
    from django.test import Client

    from entitlements.models import Entitlement

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    _demo_active[:] = (
        Entitlement.objects.exclude(tenant__slug__startswith=SYNTH)
        .filter(revoked_at__isnull=True)
        .values_list("pk", flat=True)
    )
    demo = len(_demo_active)
    ensure_synthetic(max(100 * demo, 10_000))
    client = Client()
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="demo-operator"))
    backend = reserve_setup()
    try:
        print(f"scale parts (demo = {demo} active entitlements); {load()}")
        if "--reserve-only" in sys.argv:
            return _reserve_report()
        print(f"{'scale':>6} {'active':>7} {'scopes':>7} {'refresh after a write':>23} {'full rebuild':>24} "
              f"{'old read':>9} {'home /':>7} {'usage partial':>14}")  # fmt: skip
        for k in (1, 10, 100, None):
            n = 10_000 if k is None else k * demo
            set_active(n - demo)
            restore_demo()
            (inc, inc_cpu), (full, full_cpu), old = rebuild_row()
            home = page_ms(client, "/", 3)
            usage = page_ms(client, "/usage/?tenant=acme", 3, HTTP_HX_REQUEST="true")
            label = f"{k}×" if k else "10k"
            print(f"{label:>6} {active_count():>7} {scope_count():>7} {inc:>6.1f} ms (CPU {inc_cpu:5.1f} ms) "
                  f"{full:>7.1f} ms (CPU {full_cpu:5.1f} ms) {old:>6.0f} ms {home:>4.0f} ms {usage:>5.0f} ms; {load()}")  # fmt: skip
        print(f"  refresh after a write ({where_refresh()}): counters + log id, the written scope re-summed, snapshot rebuilt; full: the "
              f"same check with every scope read; medians of 6 rounds, order swapped; goal < {GOAL_REBUILD_MS:.0f} ms "
              f"at 10k; old read: the model instances the 2 s rebuild made; pages: median of 3")  # fmt: skip
        return _reserve_report()
    finally:
        set_active(0)
        restore_demo()
        backend.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
