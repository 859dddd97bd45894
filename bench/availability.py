"""GET /api/v1/availability (issue 52, docs/contract.md §11) at 10,000 entitlements, beside a plain view.

The fleet: one model served by 8 pools in 4 regions (two accelerators each), 10,000 entitlements of 200
tenants spread over them, starting and ending on different days over the next 400 days (so every day of a
date search holds events). The asker is one tenant's requester; the ask does not fit its region (so the
date search and the replicas search run) and the other pools are listed beside it.

Three calls interleave (order rotated each round): the endpoint as it is (sold(t) read as change points,
entitlements.sold_profile), the endpoint with the old day-by-day read swapped in (availability_old_read:
the same answer, asserted), and a plain view (a DRF view through the same middleware and authentication that
reads the same pools in one query and answers their slugs): the ratio to it is the cost of the rows, not of
the request. It prints each one's median and p95, the ratios of medians, the queries one availability call
makes, and the load average. Goal: the answer under 100 ms.

Run: .venv/bin/python bench/availability.py [ROUNDS]   (BENCH_AVAILABILITY_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/availability_bench: a database of its own, created and migrated if
missing; the seed is kept and reused by the next run).
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("HEADROOM_LOCAL_HTTP", "1")  # the test client speaks plain HTTP
os.environ.setdefault("DJANGO_SECRET_KEY", "bench-availability-only-key")
os.environ["DATABASE_URL"] = os.environ.get(
    "BENCH_AVAILABILITY_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/availability_bench"
)

from ingest import setup_django  # noqa: E402

N_ENTITLEMENTS = 10_000
N_TENANTS = 200
REGIONS = ("bench-av-1", "bench-av-2", "bench-av-3", "bench-av-4")
ACCELERATORS = ("bench-av-h100", "bench-av-h200")
GOAL_S = 0.100
NEW = "availability (change points)"
OLD = "availability (old: day by day)"


def plain_view():  # the baseline: the same pools, one query, same middleware and authentication
    from rest_framework.response import Response
    from rest_framework.views import APIView

    from entitlements.models import Pool
    from entitlements.permissions import IsPerson

    class Plain(APIView):
        permission_classes = [IsPerson]

        def get(self, request):  # type: ignore[no-untyped-def]
            slug = request.query_params["model"]
            return Response({"pools": list(Pool.objects.filter(model__slug=slug).values_list("slug", flat=True))})

    return Plain.as_view()


urlpatterns: list = []


def build_urls() -> None:
    from django.urls import include, path

    urlpatterns[:] = [path("bench/plain", plain_view()), path("api/v1/", include("portal.api_urls"))]


def seed():  # type: ignore[no-untyped-def]
    """The fleet and 10,000 entitlements; idempotent (a second run reuses them)."""
    from django.utils import timezone

    from entitlements.models import Entitlement, Membership, Pool, Tenant
    from entitlements.services import entitlement_grant
    from tests.factories import (
        ENVELOPE,
        AcceleratorFactory,
        OperatingPointFactory,
        RegionFactory,
        ServedModelFactory,
        UserFactory,
        make_pool,
    )

    tenants = [Tenant.objects.get_or_create(slug=f"bench-av-t{i}", defaults={"name": f"T{i}"})[0]
               for i in range(N_TENANTS)]  # fmt: skip
    user = UserFactory._meta.model.objects.filter(username="bench-av-req").first()
    if user is None:  # the asker's tenant holds nothing yet: every pool is open to it
        user = UserFactory(username="bench-av-req")
        asker, _ = Tenant.objects.get_or_create(slug="bench-av-asker", defaults={"name": "Asker"})
        Membership.objects.create(user=user, tenant=asker, role="requester")
    pools = list(Pool.objects.filter(slug__startswith="bench-av-").order_by("pk"))
    if not pools:
        model = ServedModelFactory(slug="bench-av-model")
        accs = [AcceleratorFactory(slug=a) for a in ACCELERATORS]
        for r in REGIONS:
            region = RegionFactory(slug=r)
            for a in accs:
                op = OperatingPointFactory(model=model, accelerator=a, runtime=f"bench-{r}-{a.slug}")
                pools.append(make_pool(f"bench-av-{r[-1]}-{a.slug[-4:]}", op=op, region=region,
                                       replicas_per_zone=(8, 8)))  # fmt: skip
    have = Entitlement.objects.filter(pool__in=pools).count()
    if have >= N_ENTITLEMENTS:
        return user, pools
    rng = random.Random(52)
    now = timezone.now()
    template = entitlement_grant(
        actor=None, reason="bench", tenant=tenants[0], model=pools[0].model, region=pools[0].region,
        pool=pools[0], traffic_class="reserved", cu=Decimal(1), starts_at=now, ends_at=now + timedelta(days=30),
        envelope=ENVELOPE,
    )  # fmt: skip
    fields = {f.attname: getattr(template, f.attname) for f in Entitlement._meta.concrete_fields}
    for k in ("id", "uuid", "created_at", "updated_at"):
        fields.pop(k)
    rows = []
    for i in range(N_ENTITLEMENTS - have - 1):
        pool = pools[i % len(pools)]
        # one scope per tenant, pool and class kept apart: tenant i lives in pool i mod 8 of each region
        start = now + timedelta(days=rng.randrange(-30, 400), hours=rng.randrange(24))
        ends = None if rng.random() < 0.1 else start + timedelta(days=rng.randrange(7, 200))
        rows.append(Entitlement(**{**fields, "tenant_id": tenants[rng.randrange(N_TENANTS)].pk,
                                   "pool_id": pool.pk, "region_id": pool.region_id,
                                   "cu": Decimal(rng.randrange(500, 5000)) / 1000, "starts_at": start,
                                   "ends_at": ends}))  # fmt: skip
    Entitlement.objects.bulk_create(rows, batch_size=2000)
    from django.db import connection

    with connection.cursor() as cur:  # the planner's statistics, as a live table has them (autovacuum)
        cur.execute("ANALYZE")
    return user, pools


def measure(client, urls, rounds):  # type: ignore[no-untyped-def]
    from availability_old_read import as_steps

    import portal.availability as av

    new = av.sold_steps
    times: dict[str, list[float]] = {name: [] for name in urls}
    names = list(urls)
    for i in range(rounds):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            av.sold_steps = as_steps if name == OLD else new
            try:
                t = time.perf_counter()
                r = client.get(urls[name])
                times[name].append(time.perf_counter() - t)
            finally:
                av.sold_steps = new
            assert r.status_code == 200, (name, r.status_code, r.content[:300])
    return times


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    setup_django()
    build_urls()
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, override_settings
    from django.utils import timezone

    from entitlements.models import Entitlement

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    user, pools = seed()
    client = Client()
    client.force_login(user)
    today = timezone.now().date()
    ask = (f"model=bench-av-model&region={REGIONS[0]}&cu=600&from={(today + timedelta(days=14)).isoformat()}"
           f"&until={(today + timedelta(days=74)).isoformat()}")  # fmt: skip
    urls = {NEW: f"/api/v1/availability?{ask}", OLD: f"/api/v1/availability?{ask}",
            "plain view": "/bench/plain?model=bench-av-model"}  # fmt: skip
    with override_settings(ROOT_URLCONF=__name__):
        body = client.get(urls[NEW]).json()
        from availability_old_read import as_steps

        import portal.availability as av

        av.sold_steps, new = as_steps, av.sold_steps
        try:
            assert client.get(urls[OLD]).json() == body, "the old read answers differently"
        finally:
            av.sold_steps = new
        measure(client, urls, 3)  # warm
        times = measure(client, urls, rounds)
    # The rows' own queries (a request's are reset when it starts, so they are counted on the call itself).
    from urllib.parse import parse_qsl

    from portal.api.availability import AvailabilityQuery, ask_from
    from portal.availability import availability

    query = AvailabilityQuery(data=dict(parse_qsl(ask)))
    query.is_valid(raise_exception=True)
    with CaptureQueriesContext(connection) as q:
        availability(ask_from(query.validated_data, user), today=today)
    n = Entitlement.objects.filter(pool__in=pools).count()
    print(f"{n:,} entitlements on {len(pools)} pools in {len(REGIONS)} regions; {rounds} interleaved rounds "
          f"(order swapped each round); PostgreSQL")  # fmt: skip
    print(f"asked: {ask}")
    for r in body["rows"][:3]:
        print(f"  {r['pool']}: available {r['available_cu']} CU from {r['available_from']}, "
              f"{r['replicas_to_add']} replicas to add{' (best)' if r['best'] else ''}")  # fmt: skip
    print(
        f"queries the rows make (portal.availability.availability, whatever the pools and entitlements): "
        f"{len(q.captured_queries)}"
    )
    med = {k: statistics.median(v) for k, v in times.items()}
    for name, t in times.items():
        p95 = statistics.quantiles(t, n=20)[18]
        print(f"{name:28s}: median {med[name] * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms")
    print(f"ratio new/old read (medians): {med[NEW] / med[OLD]:.2f}; new/plain: {med[NEW] / med['plain view']:.2f}; "
          f"goal: availability under {GOAL_S * 1000:.0f} ms")  # fmt: skip
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores (other work running)")


if __name__ == "__main__":
    main()
