"""Where a web-tier reserve's CPU goes (issue 49.2): the HTTP reserve route and the bench's plain JSON view,
called in this process through Django's WSGI handler (the whole middleware stack, no socket, no gunicorn),
in blocks that alternate with the order swapped each round, the load printed per round. The CPU is the
process's (time.process_time): it includes the event buffer's thread handing batches to the broker, as a
gunicorn worker's does. Same settings, database and Redis as bench/admission.py (its environment).

Run: .venv/bin/python bench/web_tier.py [--n 400] [--rounds 6] [--profile N] [--backend redis|memory]
`--profile N`: then N reserves and N plain calls under cProfile (thread CPU): the top functions by own
time and by cumulative time, µs per call — what docs/benchmarks.md's "where the µs go" is read from.
`--parts`: two more sides in the same interleaved rounds, to split a reserve's CPU without a profiler: "no-store",
the reserve route with the backend's reserve answering a canned answer (one it gave before: no socket, no
backend Python), and "canned", the route with the whole store call (admission.services.reserve) answering a
canned Decision. reserve − no-store: the backend and its round trip; no-store − canned: admission.core's Python
(the id's signature, the event, the quota headers, the hooks); canned: the route, the view layer and Django.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
import uuid
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402  (sets the bench site's environment on import)


def environ(path: str, body: bytes, headers: dict[str, str]) -> dict:
    env = {
        "REQUEST_METHOD": "POST", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr, "wsgi.multithread": True,
        "wsgi.multiprocess": True, "wsgi.run_once": False, "wsgi.version": (1, 0),
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)), "HTTP_HOST": "127.0.0.1",
    }  # fmt: skip
    for k, v in headers.items():
        env["HTTP_" + k.upper().replace("-", "_")] = v
    return env


def caller(app, path: str, headers: dict[str, str], make_body):
    def call(i: int) -> None:
        status = []
        out = app(environ(path, json.dumps(make_body(i)).encode(), headers), lambda s, h: status.append(s))
        b"".join(out)
        getattr(out, "close", lambda: None)()
        assert status[0].startswith("200"), (path, status, b"".join(out))

    return call


def block(call, start: int, n: int) -> tuple[float, float]:
    """n calls → (CPU µs of this process per call, calls per wall second)."""
    c, w = time.process_time(), time.perf_counter()
    for i in range(n):
        call(start + i)
    wall = time.perf_counter() - w
    return (time.process_time() - c) / n * 1e6, n / wall


def patched(call, owner, name: str, value):
    """`call` with owner.name set to `value` for the length of each block (sides alternate by block)."""

    class Side:
        def __call__(self, i: int) -> None:
            call(i)

        def __enter__(self) -> None:
            self.real = getattr(owner, name)
            setattr(owner, name, value)

        def __exit__(self, *exc) -> None:
            setattr(owner, name, self.real)

    return Side()


def part_sides(app, token: str, backend) -> dict:
    """--parts' two sides (module docstring): canned answers taken from one real reserve each."""
    from admission import api, services

    hdr = {"Content-Type": "application/json", "Authorization": f"Token {token}"}
    route = caller(app, "/api/v1/admission/reserve", hdr, lambda i: ab.body(i, "wt-parts"))
    got = {}
    real_store, real_services = backend.reserve, services.reserve

    def keep_answer(op):
        got["answer"] = real_store(op)
        return got["answer"]

    def keep_decision(parsed, epoch=None):
        got["decision"] = real_services(parsed, epoch)
        return got["decision"]

    with patched(route, backend, "reserve", keep_answer), patched(route, api.services, "reserve", keep_decision):
        route(9 * 10**6)
    return {
        "no-store": patched(route, backend, "reserve", lambda op: got["answer"]),
        "canned": patched(route, api.services, "reserve", lambda parsed, epoch=None: got["decision"]),
    }


def timed(side, start: int, n: int) -> tuple[float, float]:
    if hasattr(side, "__enter__"):
        with side:
            return block(side, start, n)
    return block(side, start, n)


def profile(call, n: int, label: str, top: int = 14) -> None:
    import cProfile
    import pstats

    prof = cProfile.Profile(time.thread_time)
    prof.enable()
    for i in range(n):
        call(5 * 10**6 + i)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values()) / n * 1e6
    print(f"  cProfile (thread CPU), {label}: {total:.0f} µs per call in all, profiler-inflated; {ab.load()}")
    for by, k in (("own", 2), ("cumulative", 3)):
        print(f"    top by {by}: cumulative / own µs per call, calls per call")
        for (file, line, name), (_, nc, tt, ct, _) in sorted(stats.items(), key=lambda kv: kv[1][k], reverse=True)[
            :top
        ]:
            where = f"{'/'.join(Path(file).parts[-2:])}:{line}" if line else file
            print(f"      {ct / n * 1e6:8.1f} {tt / n * 1e6:8.1f} {nc / n:5.1f}  {name} ({where})")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=400, help="calls per side per round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--backend", choices=("redis", "memory"), default="redis")
    ap.add_argument("--parts", action="store_true", help="also the route with a canned store answer / Decision")
    args = ap.parse_args()
    os.environ["ADMISSION_BACKEND"] = args.backend
    os.environ["ADMISSION_KEY_PREFIX"] = f"webtier-{uuid.uuid4().hex[:8]}:"
    import redis

    r = redis.Redis.from_url(ab.ENV["REDIS_URL"], socket_timeout=5)
    backend = None
    try:
        token = ab.setup_db()
        from django.conf import settings
        from django.core.handlers.wsgi import WSGIHandler

        from admission.backends import get_backend

        settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "127.0.0.1"]
        backend = get_backend()
        app = WSGIHandler()
        hdr = {"Content-Type": "application/json"}
        sides = {
            "plain": caller(app, "/bench/plain", hdr, lambda i: {}),
            "reserve": caller(app, "/api/v1/admission/reserve", {**hdr, "Authorization": f"Token {token}"},
                              lambda i: ab.body(i, "wt")),
        }  # fmt: skip
        if args.parts:
            sides.update(part_sides(app, token, backend))
        print(f"web tier in process ({args.backend} store, {args.n} calls a side a round, {args.rounds} rounds, "
              f"order swapped); {ab.load()}")  # fmt: skip
        for name, call in sides.items():
            timed(call, 10**7, max(50, args.n // 2))  # warm-up, unrecorded: token cache, snapshot, scripts, imports
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in sides}
        for rnd in range(args.rounds):
            for name in list(sides) if rnd % 2 == 0 else list(sides)[::-1]:
                got[name].append(timed(sides[name], rnd * args.n, args.n))
            p, s = got["plain"][-1], got["reserve"][-1]
            parts = "".join(f", {k} {got[k][-1][0]:.0f}" for k in sides if k not in ("plain", "reserve"))
            print(f"  round {rnd + 1}: plain {p[0]:5.0f} µs CPU ({p[1]:,.0f}/s), reserve {s[0]:5.0f} µs CPU "
                  f"({s[1]:,.0f}/s){parts}; CPU plain ÷ reserve {p[0] / s[0]:.2f}; {ab.load()}")  # fmt: skip
        cpu = [p[0] / s[0] for p, s in zip(got["plain"], got["reserve"], strict=True)]
        print(f"  median: plain {median(x[0] for x in got['plain']):.0f} µs, reserve "
              f"{median(x[0] for x in got['reserve']):.0f} µs of CPU per call; plain ÷ reserve per round "
              f"{median(cpu):.2f} (rounds {', '.join(f'{x:.2f}' for x in cpu)}); {ab.load()}")  # fmt: skip
        for k in sides:
            if k not in ("plain", "reserve"):
                print(f"  {k}: median {median(x[0] for x in got[k]):.0f} µs CPU per call; reserve − {k} per round "
                      f"{median(s[0] - x[0] for s, x in zip(got['reserve'], got[k], strict=True)):.0f} µs")  # fmt: skip
        if args.profile:
            for name in ("plain", "reserve"):
                profile(sides[name], args.profile, name)
    finally:
        from admission import events

        events.buffer().flush()
        if backend is not None:
            backend.clear()
        r.delete(*ab.CELERY_KEYS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
