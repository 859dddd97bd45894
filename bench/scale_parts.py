"""Growth at 1×, 10× and 100× the demo (issue 19, items 2 and 3): the admission snapshot's rebuild,
reserve throughput, the operator's home page and the usage partial, measured on the demo fleet plus
synthetic entitlements (`growth-*` tenants, spread over the demo pools), in a database of its own.

The entitlement count is switched between rows of a table by two `.update()` statements (revoke or
restore synthetic rows), which is itself a signal-less write the snapshot must notice. Reserve
throughput alternates its two states block by block (one active entitlement, then 10,000) so a
change in the machine's load hits both alike; the load average is printed beside every ratio.

Run alone: .venv/bin/python bench/scale_parts.py   (BENCH_SCALE_PARTS_DATABASE_URL, default below; REDIS_URL,
default db 8, keys under a prefix of its own, removed at the end); bench/scale.py runs it after its table.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[1])  # not bench/: its admission.py would shadow the app

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/bench_scale_parts"
DEFAULT_REDIS = "redis://127.0.0.1:6379/8"
SYNTH = "growth-"  # tenant slug prefix of the synthetic entitlements (bench/scale.py owns "scale-")
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
    """At least n synthetic entitlements: best_effort (not sold) and reserved at 0.001 CU, round-robin
    over the demo pools and 100 tenants, open-ended, started a day ago. bulk_create: the triggers
    (history, snapshot counters) still fire per row."""
    from django.utils import timezone

    from entitlements.models import Entitlement, Pool, Tenant

    have = Entitlement.objects.filter(tenant__slug__startswith=SYNTH).count()
    if have >= n:
        return
    Tenant.objects.bulk_create(
        [Tenant(slug=f"{SYNTH}{i:03d}", name=f"Scale {i}") for i in range(100)], ignore_conflicts=True
    )
    tenants = list(Tenant.objects.filter(slug__startswith=SYNTH).order_by("slug"))
    pools = list(Pool.objects.order_by("slug"))
    start = timezone.now() - timedelta(days=1)
    rows = []
    for i in range(have, n):
        p = pools[i % len(pools)]
        cls = "reserved" if i % 2 else "best_effort"
        rows.append(
            Entitlement(
                tenant=tenants[(i // len(pools)) % len(tenants)],
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


def rebuild_after_write() -> tuple[float, float]:
    """One entitlement written by `.update()` (no signal), then the next check through the real path:
    the counter read, the entitlement rows, the derive. → (wall ms, CPU ms of this process)."""
    from django.utils import timezone

    from admission import params
    from entitlements.models import Entitlement

    params.current()
    pk = Entitlement.objects.filter(revoked_at__isnull=True).order_by("-pk").values_list("pk", flat=True)[0]
    Entitlement.objects.filter(pk=pk).update(ends_at=timezone.now() + timedelta(days=3650))
    params._next_check = 0.0
    w, c = time.perf_counter(), time.process_time()
    snap = params.current()
    wall, cpu = (time.perf_counter() - w) * 1e3, (time.process_time() - c) * 1e3
    Entitlement.objects.filter(pk=pk).update(ends_at=None)
    assert snap is params._current
    return wall, cpu


def rebuild_row(reps: int = 5) -> tuple[float, float, float]:
    """(median wall ms, median CPU ms) of a rebuild after an entitlement write; the old read's wall ms."""
    runs = [rebuild_after_write() for _ in range(reps)]
    old = median_ms(old_read, max(1, reps // 2))
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), old


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


def reserves_per_s(base: dict, seconds: float) -> float:
    """Reserve + complete pairs on one scope for `seconds` (completes keep its bucket from emptying)."""
    from admission import params, services

    params.invalidate()
    params.current()  # the rebuild after the switch is not part of the steady state measured
    n = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        d = services.reserve(services.parse_reserve({**base, "request_id": f"s{n}-{uuid.uuid4().hex[:6]}"}))
        assert d.status == 200, d.body
        services.complete(services.parse_complete({"reservation_id": d.body["reservation_id"], "prompt_tokens": 10,
                                                   "output_tokens": 10, "status": "ok"}))  # fmt: skip
        n += 1
    return n / (time.perf_counter() - t0)


def reserve_rows(big: int, blocks: int = 8, seconds: float = 1.0) -> tuple[float, float, float, int, int]:
    """Interleaved pairs of blocks (one active entitlement, then `big`; the order swaps every pair so
    neither side always runs second) → (median rate one, median rate big, median of the pairs' ratios,
    counts). The ratio of each pair is taken side by side, so a load swing between pairs cancels."""

    base = reserve_body()
    one, many, ratios = [], [], []
    n_one = n_big = 0

    def run_one() -> float:
        nonlocal n_one
        set_active(0, demo=False)
        n_one = active_count()
        return reserves_per_s(base, seconds)

    def run_big() -> float:
        nonlocal n_big
        set_active(big - len(_demo_active))
        restore_demo()
        n_big = active_count()
        return reserves_per_s(base, seconds)

    for i in range(blocks):
        if i % 2 == 0:
            a = run_one()
            b = run_big()
        else:
            b = run_big()
            a = run_one()
        one.append(a)
        many.append(b)
        ratios.append(b / a)
    return statistics.median(one), statistics.median(many), statistics.median(ratios), n_one, n_big


def _reserve_report() -> int:
    one, many, ratio, n_one, n_big = reserve_rows(10_000)
    print(f"reserve + complete, Redis, one scope: {n_one} scope(s) active {one:,.0f}/s; "
          f"{n_big:,} entitlements active {many:,.0f}/s")  # fmt: skip
    print(f"  ratio {ratio:.2f}, median of 8 interleaved pairs (goal ≥ {GOAL_RESERVE_RATIO}); {load()}")
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
        print(
            f"{'scale':>6} {'active':>7} {'snapshot rebuild':>17} {'old read':>9} {'home /':>8} {'usage partial':>14}"
        )
        for k in (1, 10, 100, None):
            n = 10_000 if k is None else k * demo
            set_active(n - demo)
            restore_demo()
            new, cpu, old = rebuild_row()
            home = page_ms(client, "/", 3)
            usage = page_ms(client, "/usage/?tenant=acme", 3, HTTP_HX_REQUEST="true")
            label = f"{k}×" if k else "10k"
            print(f"{label:>6} {active_count():>7} {new:>8.1f} ms (CPU {cpu:5.1f} ms) {old:>6.0f} ms {home:>5.0f} ms "
                  f"{usage:>5.0f} ms")  # fmt: skip
        print(f"  rebuild: counters + entitlement rows + derive, median of 5; goal < {GOAL_REBUILD_MS:.0f} ms at 10k; "
              f"old read: the model instances the 2 s rebuild made; pages: median of 3; {load()}")  # fmt: skip
        return _reserve_report()
    finally:
        set_active(0)
        restore_demo()
        backend.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
