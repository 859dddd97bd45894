"""Admission bench: Redis round trip, reserve + complete in Python, and HTTP under gunicorn.

Prints decisions/s, p50 and p99 for:
  1. a raw Redis round trip (EVALSHA of an empty script; INCR for comparison),
  2. reserve, and reserve + complete, through the Python service on the Redis backend,
  3. a plain Django JSON view under gunicorn (2 workers), and
  4. reserve through HTTP under the same gunicorn,
and the ratios against the goals, with the load average beside them. Reserve and INCR are timed
interleaved, call by call (one reserve, one INCR, ...), so a change in the machine's load hits both
alike. Needs Redis: BENCH_REDIS_URL (default redis://127.0.0.1:6379/13, a db of its own: the bench's
Celery queue is deleted at the end) and the gunicorn port BENCH_ADMISSION_PORT (default: a free one).
Everything it made (keys under its own prefix, the queue, gunicorn, the work dir) is removed at the
end, even after a Redis timeout.
Then issue 20's goals (bench/admission_modes.py): library mode vs HTTP mode, and with
BENCH_REDIS_CLUSTER_URL a Redis Cluster's two nodes vs one.
Run: .venv/bin/python bench/admission.py [--n 3000] [--clients 8] [--rounds 6] [--round-s 2]
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
CELERY_KEYS = ("celery", "_kombu.binding.celery")
os.environ.update(ENV)


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def row(name: str, lat_s: list[float], wall_s: float) -> dict:
    r = {"name": name, "per_s": len(lat_s) / wall_s, "p50_ms": pct(lat_s, 50) * 1e3, "p99_ms": pct(lat_s, 99) * 1e3}
    print(f"  {name:<44} {r['per_s']:>10,.0f}/s   p50 {r['p50_ms']:7.3f} ms   p99 {r['p99_ms']:7.3f} ms")
    return r


def timed(fn, n: int) -> tuple[list[float], float]:
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        s = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - s)
    return lat, time.perf_counter() - t0


def setup_db() -> str:
    """A fresh SQLite database with one fleet, a roomy entitlement and a gateway token."""
    import django

    django.setup()
    from decimal import Decimal

    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from entitlements import models as m
    from entitlements.services import Envelope, entitlement_grant
    from tests import factories as f

    fleet = f.build_fleet()
    kw = f.grant_kwargs(fleet.pool_a, fleet.acme, Decimal("200"), traffic_class="reserved")
    kw["envelope"] = Envelope(8000, 2000, 1000, 4000, 200, 800, 1_000_000, 2000, 200)
    entitlement_grant(actor=fleet.operator, reason="bench", **kw)
    gw = f.UserFactory(username="bench-gateway")
    m.PlatformRole.objects.create(user=gw, role="gateway")
    return m.ApiToken.issue(gw)[1]


def body(i: int, tag: str) -> dict:
    return {"request_id": f"{tag}-{i}-{uuid.uuid4().hex[:8]}", "tenant": "acme", "model": "llama-test",
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
    """a(i) and b(i) timed alternately, call by call: → (latencies of a, latencies of b)."""
    la, lb = [], []
    for i in range(n):
        s = time.perf_counter()
        a(i)
        m = time.perf_counter()
        b(i)
        la.append(m - s)
        lb.append(time.perf_counter() - m)
    return la, lb


def cleanup(r, backend, gun, incr_key: str) -> None:
    """Each step on its own: a Redis that timed out must not stop gunicorn's or the work dir's removal."""
    if gun is not None:
        os.killpg(gun.pid, signal.SIGTERM)
        gun.wait()
    for what, step in (("admission keys", lambda: backend and backend.clear()),
                       ("broker queue", lambda: print(f"  (event batches handed to the broker: "
                                                       f"{r.llen('celery')}; deleted)") or r.delete(*CELERY_KEYS)),
                       ("INCR key", lambda: r.delete(incr_key))):  # fmt: skip
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - report and go on: the rest must still be cleaned
            print(f"  !! cleanup of {what} failed: {exc!r}")
    shutil.rmtree(TMP, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6, help="alternating rounds per comparison (issue 20)")
    ap.add_argument("--round-s", type=float, default=2.0, help="seconds per round (issue 20)")
    args = ap.parse_args()
    n = args.n
    os.environ["ADMISSION_KEY_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}:"
    print(f"admission bench (n={n}, {args.clients} HTTP clients, Redis {ENV['REDIS_URL']}, work dir {TMP}); {load()}")
    import redis

    r = redis.Redis.from_url(ENV["REDIS_URL"], socket_timeout=5)
    incr_key = f"adm-bench:incr:{uuid.uuid4().hex[:8]}"
    backend = gun = None
    rows = {}
    try:
        token = setup_db()
        from django.conf import settings

        from admission import params, services
        from admission.backends import get_backend

        settings.ADMISSION_KEY_PREFIX = os.environ["ADMISSION_KEY_PREFIX"]
        params.invalidate()
        empty = r.register_script("return 1")
        empty()
        rows["evalsha"] = row("Redis round trip: EVALSHA of an empty script", *timed(lambda i: empty(), n))
        backend = get_backend()
        services.reserve(services.parse_reserve(body(0, "warm")))  # snapshot + script load

        def reserve(i: int) -> str:
            d = services.reserve(services.parse_reserve(body(i, "py")))
            assert d.status == 200, d.body
            return d.body["reservation_id"]

        t0 = time.perf_counter()
        lat_res, lat_incr = interleaved(reserve, lambda i: r.incr(incr_key), n)
        wall = time.perf_counter() - t0
        rows["incr"] = row("Redis round trip: INCR (interleaved)", lat_incr, wall)
        rows["py_reserve"] = row("reserve (Python service, Redis; interleaved)", lat_res, wall)
        pair = sorted(a / b for a, b in zip(lat_res, lat_incr, strict=True))
        rows["pair_ratio"] = pair[len(pair) // 2]
        ids: list[str] = []

        def reserve_complete(i: int) -> None:
            rid = reserve(i)
            services.complete(services.parse_complete({"reservation_id": rid, "prompt_tokens": 20,
                                                       "output_tokens": 10, "status": "ok"}))  # fmt: skip
            ids.append(rid)

        rows["py_pair"] = row("reserve + complete (Python service)", *timed(reserve_complete, n))

        port = free_port()
        gun = start_gunicorn(port)
        hdr = {"Content-Type": "application/json"}
        auth = {**hdr, "Authorization": f"Token {token}"}
        http_load(port, "/bench/plain", hdr, lambda i: {}, 200, args.clients)  # warm-up
        http_load(port, "/api/v1/admission/reserve", auth, lambda i: body(i, "warm"), 200, args.clients)
        lat, wall, bad = http_load(port, "/bench/plain", hdr, lambda i: {}, n, args.clients)
        rows["plain"] = row("plain Django JSON view (gunicorn, 2 workers)", lat, wall)
        lat, wall, bad_r = http_load(port, "/api/v1/admission/reserve", auth, lambda i: body(i, "http"), n,
                                     args.clients)  # fmt: skip
        rows["http"] = row("reserve through HTTP (same gunicorn)", lat, wall)
        if bad or bad_r:
            print(f"  !! non-200 answers: plain {bad}, reserve {bad_r}")
        from bench import admission_modes

        print("issue 20: library mode vs HTTP mode (reserve + complete)")
        rows["modes"] = admission_modes.modes(port, token, ENV["REDIS_URL"], clients=args.clients,
                                              rounds=args.rounds, round_s=args.round_s)  # fmt: skip
        if os.environ.get("BENCH_REDIS_CLUSTER_URL"):
            print("issue 20: Redis Cluster, two pools on two nodes vs one node (reserve + complete)")
            rows["cluster"] = admission_modes.cluster(os.environ["BENCH_REDIS_CLUSTER_URL"], procs=4, threads=8,
                                                      rounds=args.rounds, round_s=args.round_s)  # fmt: skip
        else:
            print("issue 20: Redis Cluster part skipped (set BENCH_REDIS_CLUSTER_URL=redis+cluster://host:port)")
    finally:
        cleanup(r, backend, gun, incr_key)

    ratio_py = rows["py_reserve"]["p50_ms"] / rows["incr"]["p50_ms"]
    ratio_http = rows["http"]["per_s"] / rows["plain"]["per_s"]
    print(f"ratios (goal); {load()}:")
    print(f"  reserve (Python) p50 / INCR p50            {ratio_py:6.2f}   (≤ 1.5; interleaved call by call)")
    print(f"  median of per-pair reserve / INCR          {rows['pair_ratio']:6.2f}")
    print(
        f"  reserve (Python) p50 / EVALSHA-empty p50   {rows['py_reserve']['p50_ms'] / rows['evalsha']['p50_ms']:6.2f}"
    )
    print(f"  HTTP reserve / plain view throughput       {ratio_http:6.2f}   (≥ 0.5)")
    print(f"  HTTP reserve p99                           {rows['http']['p99_ms']:6.2f} ms (< 10 ms)")
    print(f"  library / HTTP mode reserve+complete       {rows['modes']['ratio']:6.2f}   (≥ 5; alternating rounds)")
    if "cluster" in rows:
        print(
            f"  two pools on two nodes / one node          {rows['cluster']['ratio']:6.2f}   (≥ 1.6; alternating rounds)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
