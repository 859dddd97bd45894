"""Admission bench: the serving path against its floors (issue 35.3), every pair interleaved with the
order swapped, the machine's load printed beside each figure.

1. In process, call by call (a reserve, an INCR, then an INCR first, ...): one reserve vs one Redis
   INCR (redis-py), for the web tier's reserve (admission.services) and the library's
   (admission.library.Library, what a gateway or admission.asgi.AdmissionMiddleware runs), each on a
   plain scope and on a budgeted one (daily + monthly budget and a request rate). Goal: library
   ≤ 1.35× INCR, budgeted ≤ 1.5×.
2. Over HTTP under gunicorn (2 workers × 4 threads): a plain Django JSON view vs reserve, in
   alternating rounds with the order swapped, 8 clients; throughput and the workers' CPU per request
   (from /proc). Goal: reserve ≥ 0.75× the plain view.
3. Library mode vs HTTP mode, reserve + complete pairs/s and CPU per pair (bench/admission_modes.py).
Needs Redis: BENCH_REDIS_URL (default redis://127.0.0.1:6379/13, a db of its own: the bench's Celery
queue is deleted at the end) and the gunicorn port BENCH_ADMISSION_PORT (default: a free one).
Everything it made (keys under its own prefix, the queue, gunicorn, the work dir) is removed at the
end, even after a Redis timeout. With BENCH_REDIS_CLUSTER_URL, also a Redis Cluster's two nodes vs one.
Run: .venv/bin/python bench/admission.py [--n 3000] [--clients 8] [--rounds 6] [--round-s 2]
`--library-only`: part 1's EVALSHA and library rows alone (gunicorn still serves the library's snapshot);
`--http-only`, `--modes-only`: part 2 or part 3 alone;
`--profile N`: then the thread CPU per call of N INCRs and N library reserves on each scope, and those
reserves under cProfile: the top functions by cumulative and by own time per reserve.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

TMP = Path(tempfile.mkdtemp(prefix="adm-bench-"))
ENV = {
    "SQLITE_PATH": str(TMP / "bench.sqlite3"),
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"),
    "ADMISSION_BACKEND": "redis",
    "DJANGO_SETTINGS_MODULE": "bench.admission_site.settings",
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "bench-only",
    "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    "DJANGO_SECURE_SSL_REDIRECT": "0",
}
# Production shape: event batches go to Celery workers through the broker rather than being
# ingested on the web workers' GIL. No worker runs here; the queued batches are deleted at the end.
ENV["CELERY_BROKER_URL"] = ENV["REDIS_URL"]
# Event batches are routed to the admission-events queue (config/settings.py CELERY_TASK_ROUTES).
EVENTS_QUEUE = "admission-events"
CELERY_KEYS = (EVENTS_QUEUE, f"_kombu.binding.{EVENTS_QUEUE}", "celery", "_kombu.binding.celery")
os.environ.update(ENV)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def setup_db() -> str:
    """A fresh SQLite database with one fleet, two roomy entitlements (acme: a token rate only;
    globex: also daily and monthly budgets and a request rate, limits never reached) and a gateway token."""
    import django

    django.setup()
    from decimal import Decimal

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from entitlements import models as m
    from entitlements.services import Envelope, entitlement_grant
    from tests import factories as f

    fleet = f.build_fleet()
    env = Envelope(8000, 2000, 1000, 4000, 200, 800, 1_000_000, 2000, 200)
    for tenant, limits in ((fleet.acme, {}), (fleet.globex, BUDGETS)):
        kw = f.grant_kwargs(fleet.pool_a, tenant, Decimal("100"), traffic_class="reserved")
        kw["envelope"] = env
        entitlement_grant(actor=fleet.operator, reason="bench", **kw, **limits)
    gw = f.UserFactory(username="bench-gateway")
    m.PlatformRole.objects.create(user=gw, role="gateway")
    return m.ApiToken.issue(gw)[1]


# The budgeted scope's limits: every kind reserve.lua checks (two periods, a request rate), never reached.
BUDGETS = {"daily_budget": 10**12, "monthly_budget": 10**13, "max_rps": 1e6, "burst": 1e6}


def body(i: int, tag: str, tenant: str = "acme") -> dict:
    return {"request_id": f"{tag}-{i}-{uuid.uuid4().hex[:8]}", "tenant": tenant, "model": "llama-test",
            "region": "us-test", "traffic_class": "reserved", "prompt_tokens": 20, "max_output_tokens": 20}  # fmt: skip


def free_port() -> int:
    if os.environ.get("BENCH_ADMISSION_PORT"):
        return int(os.environ["BENCH_ADMISSION_PORT"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_gunicorn(port: int) -> subprocess.Popen:
    cmd = [str(ROOT / ".venv/bin/gunicorn"), "bench.admission_site.wsgi:application", "--bind", f"127.0.0.1:{port}",
           "--workers", "2", "--worker-class", "gthread", "--threads", "4", "--keep-alive", "30",
           "--log-level", "warning", "--chdir", str(ROOT)]  # fmt: skip
    proc = subprocess.Popen(cmd, env={**os.environ, **ENV}, start_new_session=True)
    for _ in range(600):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("gunicorn did not start")


def gateway_portal(prefix: str, signing_key: str) -> tuple[subprocess.Popen, dict[str, str], dict[str, str]]:
    """What both gateway benches (gateway_envoy.py, atlas_pairs.py) start from: a fresh database and a gunicorn
    portal, the HTTP mode's environment naming it and its gateway token, and the library mode's Redis keys."""
    token = setup_db()
    port = free_port()
    gun = start_gunicorn(port)
    portal = {"HEADROOM_URL": f"http://127.0.0.1:{port}", "HEADROOM_GATEWAY_TOKEN": token}
    library = {
        "HEADROOM_REDIS_URL": ENV["REDIS_URL"],
        "HEADROOM_KEY_PREFIX": prefix,
        "HEADROOM_SIGNING_KEY": signing_key,
    }
    return gun, portal, library


def http_load(port: int, path: str, headers: dict, make_body, n: int, clients: int, expect: int = 200) -> tuple:
    """`clients` threads, one kept-alive connection each, n requests in all; → (latencies, wall, bad)."""
    lat: list[float] = []
    bad = [0]
    lock = threading.Lock()
    per = n // clients

    def run(k: int) -> None:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        mine = []
        for i in range(per):
            data = json.dumps(make_body(k * per + i)).encode()
            s = time.perf_counter()
            c.request("POST", path, body=data, headers=headers)
            r = c.getresponse()
            r.read()
            mine.append(time.perf_counter() - s)
            if r.status != expect:
                bad[0] += 1
        c.close()
        with lock:
            lat.extend(mine)

    # warm both workers' connections, snapshot and scripts
    run_threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in run_threads:
        t.start()
    for t in run_threads:
        t.join()
    return lat, time.perf_counter() - t0, bad[0]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def interleaved(a, b, n: int) -> tuple[list[float], list[float]]:
    """a(i) and b(i) timed call by call, the order swapped on every pair (a first, then b first), so
    neither always runs on the other's warm caches: → (latencies of a, latencies of b)."""
    la, lb = [], []
    clock = time.perf_counter
    for i in range(n):
        first, second = (a, b) if i % 2 == 0 else (b, a)
        s = clock()
        first(i)
        m = clock()
        second(i)
        e = clock()
        x, y = (m - s, e - m) if i % 2 == 0 else (e - m, m - s)
        la.append(x)
        lb.append(y)
    return la, lb


def versus_incr(name: str, fn, incr, n: int, rounds: int) -> dict:
    """`fn` vs one INCR, interleaved call by call with the order swapped, in `rounds` rounds (the
    load printed per round): p50s over all rounds and the median of the per-pair ratios."""
    la: list[float] = []
    lb: list[float] = []
    per = max(1, n // rounds)
    for r in range(rounds):
        a, b = interleaved(lambda i, r=r: fn(r * per + i), incr, per)
        la += a
        lb += b
        print(
            f"    {name}: round {r + 1} p50 {pct(a, 50) * 1e6:6.0f} µs vs INCR {pct(b, 50) * 1e6:6.0f} µs   ({load()})"
        )
    pair = sorted(x / y for x, y in zip(la, lb, strict=True))
    out = {"p50_us": pct(la, 50) * 1e6, "incr_p50_us": pct(lb, 50) * 1e6, "pair": pair[len(pair) // 2]}
    out["ratio"] = out["p50_us"] / out["incr_p50_us"]
    print(f"  {name:<40} p50 {out['p50_us']:6.0f} µs  INCR {out['incr_p50_us']:6.0f} µs  "
          f"ratio {out['ratio']:.2f}  (median per pair {out['pair']:.2f})")  # fmt: skip
    return out


def http_rounds(port: int, sides: dict, n: int, clients: int, rounds: int, workers) -> dict:
    """Each side ({name: (path, headers, make_body)}) in turn, `rounds` rounds of n/rounds requests,
    the order swapped each round: requests/s over all rounds, p99, and the gunicorn workers' CPU per
    request (`workers()`: their CPU seconds so far)."""
    names = list(sides)
    got = {k: {"lat": [], "wall": 0.0, "cpu": 0.0, "bad": 0, "rounds": []} for k in names}
    per = max(clients, n // rounds)
    for k in names:  # a whole unrecorded round each first: connections, snapshot, scripts, the workers' caches
        path, headers, make = sides[k]
        http_load(port, path, headers, lambda i, make=make: make(10**7 + i), per, clients)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            path, headers, make = sides[k]
            c0 = workers()
            lat, wall, bad = http_load(port, path, headers, lambda i, r=r, make=make: make(r * per + i), per, clients)
            cpu = workers() - c0
            g = got[k]
            g["cpu"] += cpu
            g["lat"] += lat
            g["wall"] += wall
            g["bad"] += bad
            g["rounds"].append((len(lat) / wall, cpu / len(lat) * 1e3))
            print(f"    round {r + 1} {k:<8} {len(lat) / wall:7,.0f}/s   worker CPU {cpu / len(lat) * 1e3:5.2f} ms/request"
                  f"   ({load()})")  # fmt: skip
    out = {}
    for k in names:
        g = got[k]
        out[k] = {"per_s": len(g["lat"]) / g["wall"], "p99_ms": pct(g["lat"], 99) * 1e3,
                  "cpu_ms": g["cpu"] / len(g["lat"]) * 1e3, "bad": g["bad"], "rounds": g["rounds"]}  # fmt: skip
    return out


def per_round(h: dict, a: str, b: str) -> tuple[list[float], list[float]]:
    """`a` ÷ `b` round by round (the two ran back to back in each): throughput ratios, and CPU-per-request
    ratios written as b's CPU ÷ a's (higher is better, as the throughput's)."""
    thr = [x[0] / y[0] for x, y in zip(h[a]["rounds"], h[b]["rounds"], strict=True)]
    cpu = [y[1] / x[1] for x, y in zip(h[a]["rounds"], h[b]["rounds"], strict=True)]
    return thr, cpu


def cleanup(r, backend, gun, incr_key: str) -> None:
    """Each step on its own: a Redis that timed out must not stop gunicorn's or the work dir's removal."""
    if gun is not None:
        os.killpg(gun.pid, signal.SIGTERM)
        gun.wait()
    for what, step in (("admission keys", lambda: backend and backend.clear()),
                       ("broker queue", lambda: print(f"  (event batches handed to the broker: "
                                                       f"{r.llen(EVENTS_QUEUE) + r.llen('celery')}; deleted)") or r.delete(*CELERY_KEYS)),
                       ("INCR key", lambda: r.delete(incr_key))):  # fmt: skip
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - report and go on: the rest must still be cleaned
            print(f"  !! cleanup of {what} failed: {exc!r}")
    shutil.rmtree(TMP, ignore_errors=True)


def profile(fn, n: int, label: str, top: int = 10) -> None:
    """n calls of fn under cProfile, timed by this thread's CPU clock (a loaded machine's waits for
    Redis are not Python work): the top functions by cumulative and by own CPU, µs per call."""
    import cProfile
    import pstats

    c = time.thread_time()
    for i in range(n):
        fn(3 * 10**6 + i)
    print(
        f"  {label}: {(time.thread_time() - c) / n * 1e6:.1f} µs of this thread's CPU per call, unprofiled ({load()})"
    )
    if not top:
        return
    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    for i in range(n):
        fn(2 * 10**6 + i)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # (file, line, name) -> (cc, nc, tt, ct, callers)
    for by, k in (("cumulative", 3), ("own", 2)):
        rows = sorted(stats.items(), key=lambda kv: kv[1][k], reverse=True)[:top]
        print(f"  cProfile (thread CPU), {label}, {n} calls, top by {by} ({load()}): cumulative / own µs per call, "
              f"calls per call")  # fmt: skip
        for (file, line, name), (_, nc, tt, ct, _) in rows:
            where = f"{Path(file).name}:{line}" if line else file
            print(f"    {ct / n * 1e6:8.1f} {tt / n * 1e6:8.1f} {nc / n:5.1f}  {name} ({where})")


def library_ratios(rows: dict) -> int:
    print(f"ratios (goal); {load()}:")
    print(f"  EVALSHA-empty / INCR, p50                    {rows['evalsha']['ratio']:6.2f}   (the floor's round trip)")
    for k, label, goal in (("lib", "library reserve / INCR, p50", "≤ 1.35"), ("lib_b", "  budgeted scope", "≤ 1.5")):
        print(f"  {label:<44} {rows[k]['ratio']:6.2f}   ({goal}) median per pair {rows[k]['pair']:.2f}")
    return 0


def http_part(port: int, token: str, args, workers) -> dict:
    hdr = {"Content-Type": "application/json"}
    auth = {**hdr, "Authorization": f"Token {token}"}
    print(f"2. HTTP under gunicorn (2 workers × 4 threads), {args.clients} clients, {args.rounds} rounds, "
          f"order swapped each round; {load()}")  # fmt: skip
    sides = {"plain": ("/bench/plain", hdr, lambda i: {}),
             "reserve": ("/api/v1/admission/reserve", auth, lambda i: body(i, "http")),
             # the same view through every middleware (before admission.fast_route), for the cut's before/after
             "full": ("/bench/reserve-full-stack", auth, lambda i: body(i, "full"))}  # fmt: skip
    return http_rounds(port, sides, args.n, args.clients, args.rounds, workers)


def http_ratios(h: dict) -> None:
    for k, v in h.items():
        print(f"  {k:<8} {v['per_s']:7,.0f}/s   p99 {v['p99_ms']:6.1f} ms   worker CPU {v['cpu_ms']:.2f} ms/request")
        if v["bad"]:
            print(f"  !! {k}: {v['bad']} answers were not 200")
    thr, cpu = per_round(h, "full", "plain")
    print(f"  the whole stack's reserve ÷ plain view (before issue 49.2's fast route): throughput {median(thr):.2f}, "
          f"CPU {median(cpu):.2f} (rounds {', '.join(f'{x:.2f}' for x in thr)}; {', '.join(f'{x:.2f}' for x in cpu)})")  # fmt: skip
    thr, cpu = per_round(h, "reserve", "full")
    print(f"  reserve ÷ the whole stack's reserve: throughput {median(thr):.2f}, CPU {median(cpu):.2f} per round")
    thr, cpu = per_round(h, "reserve", "plain")
    print(f"  HTTP reserve ÷ plain view throughput, per round {median(thr):6.2f}   (≥ 0.75; rounds "
          f"{', '.join(f'{x:.2f}' for x in thr)}; ratio of totals {h['reserve']['per_s'] / h['plain']['per_s']:.2f})")  # fmt: skip
    print(f"  HTTP plain ÷ reserve worker CPU, per round    {median(cpu):6.2f}   (≥ 0.75; rounds "
          f"{', '.join(f'{x:.2f}' for x in cpu)}; {h['reserve']['cpu_ms']:.2f} / {h['plain']['cpu_ms']:.2f} ms "
          f"per request over all rounds)")  # fmt: skip


def http_only(port: int, token: str, args) -> int:
    from bench import admission_modes

    http_ratios(http_part(port, token, args, admission_modes.worker_cpu(_gunicorn_pid[0])))
    print(f"  ({load()})")
    return 0


_gunicorn_pid = [0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6, help="alternating rounds per comparison (≥ 5)")
    ap.add_argument("--round-s", type=float, default=2.0, help="seconds per round of the modes comparison")
    ap.add_argument("--library-only", action="store_true", help="part 1's EVALSHA and library rows alone")
    ap.add_argument("--profile", type=int, default=0, help="N library reserves per scope under cProfile")
    ap.add_argument("--http-only", action="store_true", help="part 2 alone (HTTP reserve vs the plain view)")
    ap.add_argument("--modes-only", action="store_true", help="part 3 alone (library mode vs HTTP mode)")
    args = ap.parse_args()
    n = args.n
    os.environ["ADMISSION_KEY_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}:"
    print(f"admission bench (n={n}, {args.clients} HTTP clients, Redis {ENV['REDIS_URL']}, work dir {TMP}); {load()}")
    import redis

    r = redis.Redis.from_url(ENV["REDIS_URL"], socket_timeout=5)
    incr_key = f"adm-bench:incr:{uuid.uuid4().hex[:8]}"
    backend = gun = lib = None
    rows: dict = {}
    try:
        token = setup_db()
        from django.conf import settings

        from admission import params, services
        from admission.backends import get_backend
        from admission.library import Library
        from bench import admission_modes

        settings.ADMISSION_KEY_PREFIX = os.environ["ADMISSION_KEY_PREFIX"]
        params.invalidate()
        port = free_port()
        gun = start_gunicorn(port)  # the library's portal (snapshot, events) and part 2's server
        _gunicorn_pid[0] = gun.pid
        backend = get_backend()
        empty = r.register_script("return 1")
        empty()

        def incr(i: int) -> None:
            r.incr(incr_key)

        def web(tenant: str):
            def call(i: int) -> None:
                d = services.reserve(services.parse_reserve(body(i, "py", tenant)))
                assert d.status == 200 and d.body["source"] == "entitlement", d.body

            return call

        lib = Library(f"http://127.0.0.1:{port}", token, signing_key="bench-signing-key", redis_url=ENV["REDIS_URL"],
                      prefix=os.environ["ADMISSION_KEY_PREFIX"] + "lib:", redis_timeout_s=1.0, sweep_every_s=None, http_timeout_s=30,
                      dead_letter=admission_modes.count_dead_letter)  # fmt: skip

        def library(tenant: str):
            def call(i: int) -> None:
                d = lib.reserve(**body(i, "lib", tenant))
                assert d["decision"] == "admit" and d["source"] == "entitlement", d

            return call

        if args.http_only:
            return http_only(port, token, args)
        if args.modes_only:
            from bench import admission_modes

            return admission_modes.alone(port, token, ENV["REDIS_URL"], args, gun.pid)
        for warm in (web("acme"), web("globex"), library("acme"), library("globex")):
            for i in range(50):
                warm(10**6 + i)  # snapshot, scripts, plans, connections
        print(f"1. one call vs one Redis INCR, in process, call by call with the order swapped; {load()}")
        rows["evalsha"] = versus_incr("EVALSHA of an empty script", lambda i: empty(), incr, n // 2, args.rounds)
        if not args.library_only:
            rows["web"] = versus_incr("reserve, web tier (admission.services)", web("acme"), incr, n, args.rounds)
            rows["web_b"] = versus_incr("  budgeted scope", web("globex"), incr, n, args.rounds)
        rows["lib"] = versus_incr("reserve, library (admission.library)", library("acme"), incr, n, args.rounds)
        rows["lib_b"] = versus_incr("  budgeted scope", library("globex"), incr, n, args.rounds)
        if args.profile:
            profile(incr, args.profile, "INCR", top=0)
            for tenant in ("acme", "globex"):
                profile(library(tenant), args.profile, f"library reserve, {tenant}")
        if args.library_only:
            return library_ratios(rows)

        workers = admission_modes.worker_cpu(gun.pid)
        rows["http"] = http_part(port, token, args, workers)

        print(f"3. library mode vs HTTP mode (reserve + complete); {load()}")
        rows["modes"] = admission_modes.modes(port, token, ENV["REDIS_URL"], clients=args.clients, rounds=args.rounds,
                                              round_s=args.round_s, workers=workers)  # fmt: skip
        if os.environ.get("BENCH_REDIS_CLUSTER_URL"):
            print("Redis Cluster, two pools on two nodes vs one node (reserve + complete)")
            rows["cluster"] = admission_modes.cluster(os.environ["BENCH_REDIS_CLUSTER_URL"], procs=4, threads=8,
                                                      rounds=args.rounds, round_s=args.round_s)  # fmt: skip
        else:
            print("Redis Cluster part skipped (set BENCH_REDIS_CLUSTER_URL=redis+cluster://host:port)")
    finally:
        if lib is not None:
            lib.close()
            lib.backend.clear()
        cleanup(r, backend, gun, incr_key)

    h, m = rows["http"], rows["modes"]
    print(f"ratios (goal); {load()}:")
    print(f"  EVALSHA-empty / INCR, p50                    {rows['evalsha']['ratio']:6.2f}   (the floor's round trip)")
    for k, label, goal in (("lib", "library reserve / INCR, p50", "≤ 1.35"), ("lib_b", "  budgeted scope", "≤ 1.5"),
                           ("web", "web-tier reserve / INCR, p50", ""), ("web_b", "  budgeted scope", "")):  # fmt: skip
        print(f"  {label:<44} {rows[k]['ratio']:6.2f}   {f'({goal})' if goal else ''}"
              f" median per pair {rows[k]['pair']:.2f}")  # fmt: skip
    http_ratios(h)
    print(f"  HTTP reserve p99                             {h['reserve']['p99_ms']:6.1f} ms")
    admission_modes.report(m)
    if "cluster" in rows:
        print(f"  two pools on two nodes / one node            {rows['cluster']['ratio']:6.2f}   (≥ 1.6)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
