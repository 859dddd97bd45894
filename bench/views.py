"""The entitlement page's htmx partial over 90 days × 50 entitlements, against a plain JSON view that
reads the same rollup rows and aggregates them in SQL the way the partial's selector does (same scope,
same GROUP BY bucket, decision, reason, same sums), through the same middleware stack in the same run:
the ratio is the cost of the figures and the template, not of a cheaper query.
Goals: partial ≥ 0.5× the JSON view's requests/s, partial p95 < 300 ms.

Run: .venv/bin/python bench/views.py [ROUNDS]   (BENCH_VIEWS_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/views_bench: a database of its own, which bench/ingest.py's TRUNCATE
of telemetry_bench never touches; created and migrated if missing).

`--homes [ROUNDS]`: the home page on the demo (load_demo, load_demo_alerts, seed_history as `make run`
loads it) as the tenant viewer against the operator, interleaved (order swapped each round); prints each
side's median and p95 and the ratio of medians (issue 28.10, goal: tenant home under 1 s). Database:
BENCH_HOMES_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/homes_bench.

`--homes --fleet [ROUNDS]`: the same with the demo fleet running (issue 35.4, goal: tenant home p95
under 300 ms): the web server and `manage.py simulate_fleet` are started as `make run` starts them (the
commands of bin/run_all.plan, embedded admission store: REDIS_URL is not passed on) on the homes
database and port BENCH_FLEET_PORT (default 8767); after FLEET_WARMUP_S of traffic the homes are
measured in this process, while the simulator keeps writing admissions and usage through the server.
The simulator's last lines are printed after the figures, to show it was sending throughout.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

FLEET = "--fleet" in sys.argv
HOMES = "--homes" in sys.argv or FLEET
FLEET_WARMUP_S = 20.0
if HOMES:  # as `make run` serves the demo: plain HTTP on localhost, a key of its own
    os.environ.setdefault("HEADROOM_LOCAL_HTTP", "1")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-homes-only-key")
os.environ["DATABASE_URL"] = (
    os.environ.get("BENCH_HOMES_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/homes_bench")
    if HOMES
    else os.environ.get("BENCH_VIEWS_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/views_bench")
)

from ingest import setup_django  # noqa: E402

N_ENTITLEMENTS = 50
DAYS = 90
GOAL_RATIO = 0.5
GOAL_P95_S = 0.300
REASONS = ["QUOTA_EXCEEDED", "PLATFORM_CAPACITY", "RECLAIMED", "CONCURRENCY_LIMIT"]


def json_view(request, uuid):  # the baseline: the partial's query and sums, no series, figures or template
    from django.http import Http404, JsonResponse

    from entitlements.selectors import entitlements_visible_to
    from telemetry import usage
    from telemetry.selectors import SERIES_FIELDS

    ent = entitlements_visible_to(request.user).filter(uuid=uuid).first()
    if ent is None:
        raise Http404
    end = _now()
    rows = usage.sums(
        "day",
        usage.scope(ent),
        end - timedelta(days=DAYS),
        end,
        by=("bucket", "decision", "reason"),
        fields=SERIES_FIELDS,
    )
    return JsonResponse({"rows": rows})


def _now():
    from django.utils import timezone

    return timezone.now()


urlpatterns: list = []


def build_urls() -> None:
    from django.urls import include, path

    urlpatterns[:] = [
        path("bench/json/<uuid:uuid>/", json_view),
        path("", include("portal.urls")),
    ]


def seed():
    """50 entitlements of one tenant, each with 90 days of admits, completions and four throttle reasons."""
    from decimal import Decimal

    from entitlements.models import Entitlement, PlatformRole, Tenant
    from entitlements.services import Envelope, entitlement_grant
    from tests.factories import OperatingPointFactory, UserFactory, make_pool

    tenant, _ = Tenant.objects.get_or_create(slug="bench-views", defaults={"name": "Bench views"})
    op_user = UserFactory(username="bench-operator")
    PlatformRole.objects.get_or_create(user=op_user, role="operator")
    from entitlements.models import Pool
    from telemetry.models import DayRollup

    # idempotent: a second run finds its pool, entitlements and rollups and reuses them
    pool = Pool.objects.filter(slug="bench-views-pool").first() or make_pool(
        "bench-views-pool", op=OperatingPointFactory(runtime="bench-views"), replicas_per_zone=(40, 40)
    )
    ents = list(Entitlement.objects.filter(tenant=tenant, revoked_at__isnull=True)[:N_ENTITLEMENTS])
    if len(ents) == N_ENTITLEMENTS and DayRollup.objects.filter(entitlement=str(ents[-1].uuid)).exists():
        return op_user, ents
    env = Envelope(
        max_prompt_tokens=8000, max_output_tokens=2000, prompt_p50=1000, prompt_p95=4000, output_p50=200,
        output_p95=800, max_concurrency=64, ttft_p99_ms=2000, tpot_p99_ms=200,
    )  # fmt: skip
    start = _now() - timedelta(days=DAYS + 1)
    ents += [
        entitlement_grant(
            actor=op_user,
            reason="bench",
            tenant=tenant,
            model=pool.model,
            region=pool.region,
            pool=pool,
            traffic_class="reserved",
            cu=Decimal("1"),
            starts_at=start,
            ends_at=None,
            envelope=env,
        )  # fmt: skip
        for _ in range(N_ENTITLEMENTS - len(ents))
    ]
    # Written as day rollups directly: 90-day-old events are outside ingest's plausible window (7 days),
    # and the partial reads these rows, not the events.
    base = {"tenant": tenant.slug, "model": pool.model.slug, "region": pool.region.slug, "traffic_class": "reserved"}
    today = _now().replace(hour=0, minute=0, second=0, microsecond=0)
    rows = []
    for e in ents:
        for d in range(DAYS):
            common = {**base, "bucket": today - timedelta(days=d), "entitlement": str(e.uuid), "requests": 1,
                      "estimated_wt": 500, "prompt_tokens": 100}  # fmt: skip
            rows.append(DayRollup(**common, decision="admit"))
            rows.append(DayRollup(**common, decision="complete", actual_wt=450, output_tokens=90, slo_met=1,
                                  slo_total=1))  # fmt: skip
            rows += [DayRollup(**common, decision="throttle", reason=r) for r in REASONS]
    DayRollup.objects.bulk_create(rows, batch_size=5000)
    return op_user, ents


def measure(client, urls, rounds, headers):
    times = []
    for _ in range(rounds):
        for url in urls:
            t = time.perf_counter()
            r = client.get(url, **headers)
            times.append(time.perf_counter() - t)
            assert r.status_code == 200, (url, r.status_code)
    return times


def start_fleet(port: int, log_path: Path) -> list:
    """The web server and the fleet simulator on `port`, as `make run` starts them; the caller stops them."""
    import subprocess

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bin"))
    from run_all import ROOT, _answers, plan

    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "CELERY_BROKER_URL")}
    # Its own static root, collected as `make run` collects it (the pages need the manifest).
    env["DJANGO_STATIC_ROOT"] = f"/tmp/bench_views_static_{os.getpid()}"
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True
    )
    procs = {p.name: p for p in plan(env, host="127.0.0.1", port=port)}
    children = []
    for name in ("web", "simulator"):
        if name == "simulator":
            deadline = time.monotonic() + 60
            while not _answers("127.0.0.1", port):
                if children[0].poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"--fleet: the web server did not answer on port {port} (see {log_path})")
                time.sleep(0.2)
        p, log = procs[name], log_path.with_suffix(f".{name}.log").open("w")
        children.append(
            subprocess.Popen(
                p.argv, cwd=ROOT, env={**env, **p.env}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        )
    return children


def homes(rounds: int) -> None:
    from io import StringIO

    from django.conf import settings
    from django.core.management import call_command

    from demo.history import seed_history

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # Static files unhashed (no collectstatic in a bench); the pages' work is unchanged.
    from django.test.utils import override_settings

    plain = {**settings.STORAGES, "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}
    override_settings(STORAGES=plain).enable()
    for command in ("load_demo", "load_demo_alerts"):  # both idempotent
        call_command(command, stdout=StringIO())
    seed_history()  # writes nothing when history exists
    children, log_path, port = [], Path(f"/tmp/bench_views_fleet_{os.getpid()}.log"), 0
    if FLEET:
        port = int(os.environ.get("BENCH_FLEET_PORT", "8767"))
        children = start_fleet(port, log_path)
        time.sleep(FLEET_WARMUP_S)
    try:
        _measure_homes(rounds, port)
    finally:
        if children:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bin"))
            from run_all import stop_all

            stop_all(children)
            shutil.rmtree(f"/tmp/bench_views_static_{os.getpid()}", ignore_errors=True)
    if FLEET:
        tail = log_path.with_suffix(".simulator.log").read_text().strip().splitlines()[-3:]
        print("fleet simulator (last lines of its log):", *(f"  {line}" for line in tail), sep="\n")


def _measure_homes(rounds: int, port: int) -> None:
    """Each home as its person sees it: through the fleet's own web server when `port` (so its
    requests queue with the simulator's), else in this process."""
    import urllib.request

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    def getter(client: Client):  # type: ignore[no-untyped-def]
        if not port:
            return lambda: client.get("/").status_code
        name = settings.SESSION_COOKIE_NAME
        cookie = f"{name}={client.cookies[name].value}"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Cookie": cookie})

        def over_http() -> int:
            with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310  # our own local server
                r.read()
                return int(r.status)

        return over_http

    gets = {}
    for who in ("demo-viewer", "demo-operator"):
        client = Client()
        client.force_login(get_user_model().objects.get(username=who))
        gets[who] = getter(client)
        assert gets[who]() == 200  # warm
    times: dict[str, list[float]] = {who: [] for who in gets}
    for i in range(rounds):
        for who in list(gets)[:: 1 if i % 2 else -1]:
            t = time.perf_counter()
            status = gets[who]()
            times[who].append(time.perf_counter() - t)
            assert status == 200, (who, status)
    med = {who: statistics.median(t) for who, t in times.items()}
    fleet = f", over HTTP with the demo fleet running ({FLEET_WARMUP_S:.0f} s warm-up)" if FLEET else ""
    print(f"home page on the demo{fleet}, {rounds} interleaved rounds (order swapped each round)")
    for who, t in times.items():
        p95 = statistics.quantiles(t, n=20)[18] if len(t) >= 2 else t[0]
        print(f"{who:14s}: median {med[who] * 1000:7.1f} ms  p95 {p95 * 1000:7.1f} ms")
    goal = "tenant p95 under 300 ms with the fleet running" if FLEET else "tenant under 1 s"
    print(f"ratio tenant/operator (medians): {med['demo-viewer'] / med['demo-operator']:.2f}; goal: {goal}")
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores")


def main() -> None:
    args = [a for a in sys.argv[1:] if a not in ("--homes", "--fleet")]
    rounds = int(args[0]) if args else 4
    if HOMES:
        setup_django()
        homes(max(rounds, 10))
        return
    setup_django()
    build_urls()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import override_settings

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    user, ents = seed()
    client = Client()
    client.force_login(user)
    partial_urls = [f"/entitlements/{e.uuid}/?range=90d" for e in ents]
    json_urls = [f"/bench/json/{e.uuid}/" for e in ents]
    with override_settings(ROOT_URLCONF=__name__):
        sample = client.get(partial_urls[0], HTTP_HX_REQUEST="true").content.decode()
        assert sample.lstrip().startswith('<section id="entitlement-panels"'), sample[:200]
        measure(client, partial_urls[:5] + json_urls[:5], 1, {"HTTP_HX_REQUEST": "true"})  # warm caches
        partial = measure(client, partial_urls, rounds, {"HTTP_HX_REQUEST": "true"})
        plain = measure(client, json_urls, rounds, {})
    p_rps, j_rps = len(partial) / sum(partial), len(plain) / sum(plain)
    p95 = statistics.quantiles(partial, n=20)[18]
    print(f"{N_ENTITLEMENTS} entitlements × {DAYS} days, {rounds} rounds each ({len(partial)} requests per view)")
    print(f"JSON, same SQL sums  : {j_rps:8.1f} req/s  p95 {statistics.quantiles(plain, n=20)[18] * 1000:6.1f} ms")
    print(f"htmx partial         : {p_rps:8.1f} req/s  p95 {p95 * 1000:6.1f} ms")
    print(f"ratio partial/JSON   : {p_rps / j_rps:.2f}  (goal ≥ {GOAL_RATIO}); p95 goal < {GOAL_P95_S * 1000:.0f} ms")
    one, five, fifteen = os.getloadavg()
    print(f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
