"""Issue 35.3: Headroom vs Atlas, reserve + complete pairs/s and CPU per pair, measured side by side.

A client only: start an Atlas gateway as its own README says (github.com/BugVanquisher/Atlas, read at
e2aa4ae09b57: `uvicorn gateway.main:app --port 8080` in its own virtualenv), with REDIS_URL on loopback,
ADMIN_API_KEY set, and UPSTREAM_BASE_URL at the canned upstream this file serves
(`.venv/bin/python bench/atlas_pairs.py --serve-upstream 9000`: the same SSE answer to every request, for
a few µs of CPU, so the model server's stand-in takes as little of the shared cores as it can) or at
this project's test upstream (`.venv/bin/python -m tests.integrations.upstream --port 9000`). Then:

    BENCH_REDIS_URL=redis://127.0.0.1:6379/N .venv/bin/python bench/atlas_pairs.py \
        --atlas-url http://127.0.0.1:8080 --atlas-admin-key KEY [--atlas-redis-url redis://127.0.0.1:6379/M]

Atlas has no reserve or complete endpoint: its token-aware pair is its streaming proxy path
(gateway/streaming.py). A `"stream": true` chat completion reserves `max_tokens` (usage read, then INCRBY),
proxies the upstream, then refunds the reservation minus the upstream's `usage.total_tokens`. One such
request is Atlas's pair, and Atlas's CPU is that whole request: its framework, the two upstream hops its
streaming path makes (a validation stream, then the real one) and its admission code (docs/gateways.md
splits it by a profile); the upstream's own CPU (the model server's) is counted on no side. Every side
reserves the same estimate (40 tokens: Headroom prompt 20 + max output 20; Atlas max_tokens 40) and
settles the same actual (30: Headroom prompt 20 + output 10; Atlas's upstream reports total 30 with one
output token, the least proxying Atlas can do for it). Headroom's sides are bench/admission_modes.py's:
HTTP mode against gunicorn as bench/admission.py starts it, library mode in this process.

`--clients` threads, `--rounds` rounds of `--round-s` seconds per side, the order reversed every round,
the load printed beside each. CPU per pair: this process's (the clients) plus the servers': Atlas's
processes (the one listening on its port and their children, or `--atlas-pid`) for Atlas; the gunicorn
workers for both Headroom sides (library mode's event batches land there). Redis's CPU is counted on no
side (a shared server). Exit 2 when Atlas does not answer, or when any side throttles or fails a pair.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench.admission_modes import _pairs, body, count_dead_letter, worker_cpu  # noqa: E402
from bench.rounds import cleanup, cpu_s, load  # noqa: E402

SAMPLE = body("x", 0, 0)
ESTIMATE = SAMPLE["prompt_tokens"] + SAMPLE["max_output_tokens"]  # 40
SETTLE = {"prompt_tokens": 20, "output_tokens": 10}
ACTUAL = sum(SETTLE.values())  # 30
# tests/integrations/upstream.py counts prompt = words + 3 per message and stops at short:K output tokens.
ATLAS_BODY = json.dumps({"model": "llama-test", "stream": True, "max_tokens": ESTIMATE,
                         "stream_options": {"include_usage": True},
                         "messages": [{"role": "user", "content": " ".join(["short:1"] + ["w"] * (ACTUAL - 5))}]}).encode()  # fmt: skip


_CHUNK = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "ok"}}]}
_USAGE = {"object": "chat.completion.chunk", "choices": [],
          "usage": {"prompt_tokens": ACTUAL - 1, "completion_tokens": 1, "total_tokens": ACTUAL}}  # fmt: skip
_SSE = f"data: {json.dumps(_CHUNK)}\n\ndata: {json.dumps(_USAGE)}\n\ndata: [DONE]\n\n".encode()
CANNED = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(_SSE)) + _SSE


class Canned(asyncio.Protocol):
    """Any request (keep-alive, Content-Length bodies) → CANNED: a model server that costs next to nothing."""

    def connection_made(self, transport: Any) -> None:
        self.transport, self.buf = transport, b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in self.buf[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            self.buf = self.buf[end + 4 + length :]
            self.transport.write(CANNED)


def serve_upstream(port: int) -> int:
    shutil.rmtree(ab.TMP, ignore_errors=True)  # the bench portal's work dir: this process has no portal

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Canned, "127.0.0.1", port)
        print(f"canned upstream on 127.0.0.1:{port} (every answer: total_tokens {ACTUAL})", flush=True)
        await server.serve_forever()

    asyncio.run(serve())
    return 0


class Invalid(Exception):
    """The measurement is not valid (Atlas silent, a throttle, a failed pair): exit 2."""


def pids_on_port(port: int) -> set[int]:
    """The processes holding the listening socket on `port` (/proc/net/tcp*: its inode), with their children."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as fh:
            for line in fh.readlines()[1:]:
                f = line.split()
                if f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{f[9]}]")
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in os.listdir(f"/proc/{pid}/fd")):
                found.add(int(pid))
        except OSError:
            continue
    return with_children(found)


def with_children(pids: set[int]) -> set[int]:
    out = set(pids)
    for pid in pids:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                out |= {int(k) for k in fh.read().split()}
    return out


def atlas_call(url: str, key: str, count: dict[str, int]) -> Callable[[int], Callable[[int], None]]:
    u = urlsplit(url)
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}

    def make(k: int) -> Callable[[int], None]:
        c = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=30)

        def call(i: int) -> None:
            c.request("POST", "/v1/chat/completions", body=ATLAS_BODY, headers=headers)
            r = c.getresponse()
            raw = r.read()
            if r.status == 429:
                count["throttled"] += 1
            elif r.status != 200 or f'"total_tokens": {ACTUAL}}}'.encode() not in raw:
                count["failed"] += 1
                count.setdefault("first_failure", f"{r.status} {raw[:200]!r}")  # type: ignore[arg-type]
            else:
                count["admitted"] += 1

        return call

    return make


def headroom_call(client: Any, tag: str, count: dict[str, int]) -> Callable[[int], Callable[[int], None]]:
    def make(k: int) -> Callable[[int], None]:
        def call(i: int) -> None:
            d = client.reserve(**body(tag, k, i))
            if d.get("decision") == "throttle":
                count["throttled"] += 1
            elif (
                d.get("decision") != "admit"
                or d.get("source") == "fail_open"  # not the store's admission
                or client.complete(d["reservation_id"], **SETTLE, status="ok") is None  # not settled
            ):
                count["failed"] += 1
            else:
                count["admitted"] += 1

        return call

    return make


def atlas_setup(args: argparse.Namespace) -> str:
    """Atlas answers (else Invalid); → the API key to use (a fresh one with room when the admin key is given)."""
    u = urlsplit(args.atlas_url)
    try:
        c = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port or 80, timeout=10)
        c.request("GET", "/healthz")
        r = c.getresponse()
        health = r.read()
        if r.status != 200 or not json.loads(health).get("ok"):
            raise Invalid(f"Atlas at {args.atlas_url} is not healthy: {r.status} {health[:200]!r}")
        if args.atlas_key:
            return str(args.atlas_key)
        key = f"bench-{uuid.uuid4().hex[:8]}"
        roomy = {"api_key": key, "daily_limit": 10**15, "monthly_limit": 10**15, "rate_per_sec": 1e6, "burst": 10**6}
        c.request("POST", "/v1/admin/keys", body=json.dumps(roomy),
                  headers={"X-Admin-Key": args.atlas_admin_key, "Content-Type": "application/json"})  # fmt: skip
        r = c.getresponse()
        if r.status != 200:
            raise Invalid(f"Atlas refused the key registration: {r.status} {r.read()[:200]!r}")
        r.read()
        return key
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise Invalid(f"Atlas does not answer at {args.atlas_url}: {exc!r}") from exc


def atlas_usage(redis_url: str | None, key: str) -> int | None:
    """Atlas's own count of today's tokens for `key` (reservations less refunds), when its Redis is given."""
    if not redis_url:
        return None
    import redis

    r = redis.Redis.from_url(redis_url)
    return int(r.get(f"usage:d:{key}:{time.strftime('%Y%m%d', time.gmtime())}") or 0)


def atlas_forget(redis_url: str | None, key: str) -> None:
    """The key this bench registered, and what Atlas counted for it, removed from Atlas's Redis."""
    if redis_url:
        import redis

        r = redis.Redis.from_url(redis_url)
        for k in r.scan_iter(match=f"*{key}*", count=1000):
            r.delete(k)


Side = tuple[Callable[[int], Callable[[int], None]], Callable[[], float]]  # make a client's call, servers' CPU


def measure(sides: dict[str, Side], args: argparse.Namespace, upstream: Callable[[], float]) -> dict:
    names = list(sides)
    pairs = dict.fromkeys(names, 0)
    cpu = {n: [0.0, 0.0, 0.0] for n in names}  # clients, servers, the upstream (counted on no side)
    for r in range(args.rounds):
        row = []
        for name in names if r % 2 == 0 else names[::-1]:
            make, server = sides[name]
            c0, s0, u0 = time.process_time(), server(), upstream()
            n = _pairs(make, args.clients, args.round_s)
            mine, theirs = time.process_time() - c0, server() - s0
            pairs[name] += n
            cpu[name][0] += mine
            cpu[name][1] += theirs
            cpu[name][2] += upstream() - u0
            row.append(f"{name} {n / args.round_s:,.0f}/s {(mine + theirs) / max(n, 1) * 1e3:.2f} ms")
        print(f"  round {r + 1}: " + ", ".join(row) + f"   ({load()})")
    return {"pairs": pairs, "cpu": cpu}


def report(m: dict, counts: dict[str, dict[str, int]], args: argparse.Namespace) -> None:
    span = args.rounds * args.round_s
    rate = {n: p / span for n, p in m["pairs"].items()}
    ms = {n: sum(c[:2]) / max(m["pairs"][n], 1) * 1e3 for n, c in m["cpu"].items()}
    for n in rate:
        cl, sv, up = (x / max(m["pairs"][n], 1) * 1e3 for x in m["cpu"][n])
        c = counts[n]
        print(f"  {n:<16} {rate[n]:8,.0f} pairs/s   CPU {ms[n]:.2f} ms/pair (clients {cl:.2f}, servers {sv:.2f})"
              f"   admitted {c['admitted']:,}, throttled {c['throttled']}, failed {c['failed']}"
              + (f"   [upstream, not counted: {up:.2f} ms/pair]" if n == "Atlas" and args.upstream_port else ""))  # fmt: skip
    for n in ("Headroom HTTP", "Headroom library"):
        ratio, cpu = rate[n] / rate["Atlas"], ms[n] / ms["Atlas"]
        verdict = "meets" if ratio >= 2 and cpu <= 1 else "MISSES"
        print(f"  {n} ÷ Atlas: {ratio:.2f}× pairs/s, {cpu:.2f}× the CPU per pair ({verdict} ≥ 2×, ≤ 1×)   ({load()})")


def run(args: argparse.Namespace) -> int:
    from admission.client import AdmissionClient
    from admission.library import Library

    key = atlas_setup(args)
    atlas_pids = (
        with_children({args.atlas_pid}) if args.atlas_pid else pids_on_port(urlsplit(args.atlas_url).port or 80)
    )
    if not atlas_pids:
        raise Invalid(f"no process listens on {args.atlas_url}'s port here: give --atlas-pid")
    before = atlas_usage(args.atlas_redis_url, key)
    prefix = f"benchatlas-{uuid.uuid4().hex[:6]}:"
    os.environ["ADMISSION_KEY_PREFIX"] = prefix  # the gunicorn portal's keys, removed by cleanup()
    gun = lib = None
    try:
        token = ab.setup_db()
        port = ab.free_port()
        gun = ab.start_gunicorn(port)
        url = f"http://127.0.0.1:{port}"
        http_client = AdmissionClient(url, token, timeout_s=10)
        lib = Library(url, token, signing_key="bench-signing-key", redis_url=ab.ENV["REDIS_URL"], prefix=f"{prefix}lib:",
                      redis_timeout_s=1.0, sweep_every_s=None, http_timeout_s=30, event_flush_s=1.0,
                      dead_letter=count_dead_letter)  # fmt: skip
        workers = worker_cpu(gun.pid)
        counts = {
            n: {"admitted": 0, "throttled": 0, "failed": 0} for n in ("Atlas", "Headroom HTTP", "Headroom library")
        }
        sides: dict[str, Side] = {
            "Atlas": (atlas_call(args.atlas_url, key, counts["Atlas"]), lambda: sum(cpu_s(p) for p in atlas_pids)),
            "Headroom HTTP": (headroom_call(http_client, "http", counts["Headroom HTTP"]), workers),
            "Headroom library": (headroom_call(lib, "lib", counts["Headroom library"]), workers),
        }
        up_pids = pids_on_port(args.upstream_port) if args.upstream_port else set()
        warm = {n: _pairs(make, args.clients, 1.0) for n, (make, _) in sides.items()}  # connections, snapshot, scripts
        bad = {n: c for n, c in counts.items() if c["throttled"] or c["failed"] or not c["admitted"]}
        if bad:
            raise Invalid(f"warm-up: a side throttled or failed: {bad}")
        for c in counts.values():
            c.update(admitted=0, throttled=0, failed=0)
        print(f"reserve + complete: Atlas {args.atlas_url} (pids {sorted(atlas_pids)}), Headroom HTTP mode (gunicorn "
              f"2 × 4 threads, {url}), library mode; {args.clients} clients, estimate {ESTIMATE} / actual {ACTUAL} "
              f"tokens; {args.rounds} rounds of {args.round_s:.1f} s, order reversed every round; {load()}")  # fmt: skip
        m = measure(sides, args, lambda: sum(cpu_s(p) for p in up_pids))
        report(m, counts, args)
        after = atlas_usage(args.atlas_redis_url, key)
        if before is not None and after is not None:
            # Every Atlas pair settled to the actual: its usage grew by exactly ACTUAL per pair (warm-up included).
            want = ACTUAL * (m["pairs"]["Atlas"] + warm["Atlas"])
            print(
                f"  Atlas's usage counter grew {after - before:,} tokens for {want // ACTUAL:,} pairs (want {want:,})"
            )
            if after - before != want:
                raise Invalid("Atlas's usage is not the actual per pair: a reservation was not settled")
        bad = {n: c for n, c in counts.items() if c["throttled"] or c["failed"]}
        if bad:
            raise Invalid(f"a side throttled or failed during the measurement: {bad}")
        return 0
    finally:
        if lib is not None:
            lib.close()
        cleanup(gun, prefix, ab.TMP)
        if not args.atlas_key:
            atlas_forget(args.atlas_redis_url, key)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve-upstream", type=int, metavar="PORT", help="only serve the canned upstream on PORT")
    ap.add_argument("--atlas-url", help="a running Atlas gateway, e.g. http://127.0.0.1:8080")
    ap.add_argument("--upstream-port", type=int, help="Atlas's upstream here: its CPU per pair is printed apart")
    ap.add_argument("--atlas-admin-key", help="Atlas's ADMIN_API_KEY: a fresh key with room is registered")
    ap.add_argument("--atlas-key", help="an Atlas API key that already has room (instead of --atlas-admin-key)")
    ap.add_argument("--atlas-pid", type=int, help="Atlas's server process (default: the one listening on its port)")
    ap.add_argument("--atlas-redis-url", help="Atlas's Redis: checks its usage grew by the actual per pair")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6, help="rounds per side (≥ 6), order reversed every round")
    ap.add_argument("--round-s", type=float, default=2.0)
    args = ap.parse_args()
    if args.serve_upstream:
        return serve_upstream(args.serve_upstream)
    if not args.atlas_url:
        ap.error("give --atlas-url")
    if not (args.atlas_admin_key or args.atlas_key):
        ap.error("give --atlas-admin-key or --atlas-key")
    if args.rounds < 6:
        ap.error("--rounds must be ≥ 6")
    try:
        return run(args)
    except Invalid as exc:
        print(f"!! not a valid measurement: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
