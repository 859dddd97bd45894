"""Issue 35.3: Headroom vs Atlas, requests/s and CPU per request on the same whole request, side by side.

A client only: start an Atlas gateway as its own README says (github.com/BugVanquisher/Atlas, read at
e2aa4ae09b57: `uvicorn gateway.main:app --port 8080` in its own virtualenv), with REDIS_URL on loopback,
ADMIN_API_KEY set, and UPSTREAM_BASE_URL at the canned upstream this file serves
(`.venv/bin/python bench/atlas_pairs.py --serve-upstream 9000`: the same SSE answer to every request, for
a few µs of CPU, so the model server's stand-in takes as little of the shared cores as it can) or at
this project's test upstream (`.venv/bin/python -m tests.integrations.upstream --port 9000`). Then:

    BENCH_REDIS_URL=redis://127.0.0.1:6379/N .venv/bin/python bench/atlas_pairs.py \
        --atlas-url http://127.0.0.1:8080 --atlas-admin-key KEY --upstream-port 9000 [--atlas-redis-url redis://127.0.0.1:6379/M]

Equal work (issue 49.5): Atlas has no reserve or complete endpoint; its token-aware pair is its whole
streaming proxy request (gateway/streaming.py): a `"stream": true` chat completion reserves `max_tokens`
(usage read, then INCRBY), proxies the upstream, then refunds the reservation minus the upstream's
`usage.total_tokens`. Headroom's equivalent whole request is the same chat completion, the same bytes,
through a gateway that meters it: Envoy with Headroom's ext_proc (integrations/envoy, library mode on
Redis and HTTP mode on the portal) before the same upstream, which reserves the prompt estimate plus
`max_tokens`, proxies the stream, reads its `usage` and completes with it. (This bench compared Atlas's
whole request with a bare reserve + complete before, which flattered Headroom: it skipped the proxying.)
Per side the CPU is the client's plus the servers': Atlas's processes (the one listening on its port
and their children, or `--atlas-pid`); for Headroom, its Envoy (one worker), its ext_proc and the
portal's gunicorn workers (library mode's event batches land there, HTTP mode's reserves too). The
upstream's own CPU (the model server's) is counted on no side. Every side asks the same 40-token
estimate of the same upstream answer (total 30 tokens, one output token).
`--no-atlas` measures the two Headroom sides alone (no ratio): a check of this bench without an Atlas.

`--clients` threads, `--rounds` rounds of `--round-s` seconds per side, the order reversed every round,
the load printed beside each. Redis's CPU is counted on no side (a shared server). Exit 2 when Atlas
does not answer, or when any side throttles or fails a request.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench.admission_modes import _pairs, body, worker_cpu  # noqa: E402
from bench.rounds import cleanup, cpu_s, load  # noqa: E402
from tests.integrations import stack  # noqa: E402

HEADROOM_KEY = "sk-bench-atlas"  # the Envoy ext_proc's API key → tenant acme (its config file)

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


def headroom_envoy(work: Path, stop: contextlib.ExitStack, upstream_port: int, portal: dict[str, str],
                   lib_env: dict[str, str]) -> dict[str, tuple[int, list[int]]]:  # fmt: skip
    """Two Envoys before the upstream, each with a Headroom ext_proc (library mode, HTTP mode), as
    bench/gateway_envoy.py starts them → side → (listener port, the pids of its Envoy and ext_proc)."""
    from bench import gateway_envoy as ge

    (work / "ext_proc.json").write_text(
        json.dumps({"keys": {HEADROOM_KEY: {"tenant": "acme", "traffic_class": "reserved"}}})
    )
    out = {}
    for side, env in (("Headroom library", lib_env), ("Headroom HTTP", {"HEADROOM_TIMEOUT_S": "5"})):
        tag = "lib" if "library" in side else "http"
        port = stack.free_port()
        ext = ge.ext_proc(work, f"ext_{tag}", port, {**portal, **env})
        stop.callback(ext.stop)
        proxy, ports = ge.envoy(work, f"envoy_{tag}", upstream_port, [port], without=False)
        stop.callback(proxy.stop)
        out[side] = (ports["with"], [proxy.proc.pid, ext.proc.pid])
    return out


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
    rounds: dict[str, list[int]] = {n: [] for n in names}
    cpu = {n: [0.0, 0.0, 0.0] for n in names}  # clients, servers, the upstream (counted on no side)
    for r in range(args.rounds):
        row = []
        for name in names if r % 2 == 0 else names[::-1]:
            make, server = sides[name]
            c0, s0, u0 = time.process_time(), server(), upstream()
            n = _pairs(make, args.clients, args.round_s)
            mine, theirs = time.process_time() - c0, server() - s0
            pairs[name] += n
            rounds[name].append(n)
            cpu[name][0] += mine
            cpu[name][1] += theirs
            cpu[name][2] += upstream() - u0
            row.append(f"{name} {n / args.round_s:,.0f}/s {(mine + theirs) / max(n, 1) * 1e3:.2f} ms")
        print(f"  round {r + 1}: " + ", ".join(row) + f"   ({load()})")
    return {"pairs": pairs, "cpu": cpu, "rounds": rounds}


def report(m: dict, counts: dict[str, dict[str, int]], args: argparse.Namespace) -> None:
    span = args.rounds * args.round_s
    rate = {n: p / span for n, p in m["pairs"].items()}
    ms = {n: sum(c[:2]) / max(m["pairs"][n], 1) * 1e3 for n, c in m["cpu"].items()}
    for n in rate:
        cl, sv, up = (x / max(m["pairs"][n], 1) * 1e3 for x in m["cpu"][n])
        c = counts[n]
        print(f"  {n:<16} {rate[n]:8,.0f} requests/s   CPU {ms[n]:.2f} ms/request (clients {cl:.2f}, servers {sv:.2f})"
              f"   admitted {c['admitted']:,}, throttled {c['throttled']}, failed {c['failed']}"
              f"   [upstream, not counted: {up:.2f} ms/request]")  # fmt: skip
    if "Atlas" not in rate:
        return
    for n in ("Headroom HTTP", "Headroom library"):
        per = [h / max(a, 1) for h, a in zip(m["rounds"][n], m["rounds"]["Atlas"], strict=True)]
        ratio, cpu = statistics.median(per), ms[n] / ms["Atlas"]
        verdict = "meets" if ratio >= 2 and cpu <= 1 else "MISSES"
        print(f"  {n} ÷ Atlas, the same whole request: {ratio:.2f}× requests/s (median of the rounds' ratios: "
              f"{', '.join(f'{x:.2f}' for x in per)}), {cpu:.2f}× the CPU per request ({verdict} ≥ 2×, ≤ 1×)"
              f"   ({load()})")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    key = atlas_setup(args) if args.atlas_url else ""
    atlas_pids: set[int] = set()
    if args.atlas_url:
        atlas_pids = (
            with_children({args.atlas_pid}) if args.atlas_pid else pids_on_port(urlsplit(args.atlas_url).port or 80)
        )
        if not atlas_pids:
            raise Invalid(f"no process listens on {args.atlas_url}'s port here: give --atlas-pid")
    before = atlas_usage(args.atlas_redis_url, key) if args.atlas_url else None
    prefix = f"benchatlas-{uuid.uuid4().hex[:6]}:"
    os.environ["ADMISSION_KEY_PREFIX"] = prefix  # the gunicorn portal's keys, removed by cleanup()
    work = Path(tempfile.mkdtemp(prefix="atlas-pairs-"))
    gun = None
    with contextlib.ExitStack() as stop:
        try:
            gun, portal, lib_env = ab.gateway_portal(f"{prefix}lib:", "bench-signing-key")
            url = portal["HEADROOM_URL"]
            workers = worker_cpu(gun.pid)
            names = (["Atlas"] if args.atlas_url else []) + ["Headroom HTTP", "Headroom library"]
            counts = {n: {"admitted": 0, "throttled": 0, "failed": 0} for n in names}
            sides: dict[str, Side] = {}
            if args.atlas_url:
                sides["Atlas"] = (atlas_call(args.atlas_url, key, counts["Atlas"]),
                                  lambda: sum(cpu_s(p) for p in atlas_pids))  # fmt: skip
            for side, (lport, pids) in headroom_envoy(work, stop, args.upstream_port, portal, lib_env).items():
                sides[side] = (atlas_call(f"http://127.0.0.1:{lport}", HEADROOM_KEY, counts[side]),
                               lambda pids=pids: workers() + sum(cpu_s(p) for p in pids))  # fmt: skip
            sides = {n: sides[n] for n in names}
            up_pids = pids_on_port(args.upstream_port)
            for make, _ in sides.values():  # first use (the snapshot read, the connections): one client at a time
                for _ in range(10):
                    _pairs(make, 1, 0.5)
            for c in counts.values():
                c.update(admitted=0, throttled=0, failed=0)
            warm = {n: _pairs(make, args.clients, 1.0) for n, (make, _) in sides.items()}
            bad = {n: c for n, c in counts.items() if c["throttled"] or c["failed"] or not c["admitted"]}
            if bad:
                raise Invalid(f"warm-up: a side throttled or failed: {bad}")
            for c in counts.values():
                c.update(admitted=0, throttled=0, failed=0)
            print(f"one streaming chat completion, the whole request: Atlas {args.atlas_url or '(not measured)'} "
                  f"(pids {sorted(atlas_pids)}); Headroom in Envoy (1 worker) with its ext_proc, HTTP mode (portal: "
                  f"gunicorn 2 × 4 threads, {url}) and library mode; upstream 127.0.0.1:{args.upstream_port}; "
                  f"{args.clients} clients, estimate {ESTIMATE} / actual {ACTUAL} tokens; {args.rounds} rounds of "
                  f"{args.round_s:.1f} s, order reversed every round; {load()}")  # fmt: skip
            m = measure(sides, args, lambda: sum(cpu_s(p) for p in up_pids))
            report(m, counts, args)
            after = atlas_usage(args.atlas_redis_url, key) if args.atlas_url else None
            if before is not None and after is not None:
                # Every Atlas request settled to the actual: its usage grew by exactly ACTUAL each (warm-up included).
                want = ACTUAL * (m["pairs"]["Atlas"] + warm["Atlas"])
                print(f"  Atlas's usage counter grew {after - before:,} tokens for {want // ACTUAL:,} requests "
                      f"(want {want:,})")  # fmt: skip
                if after - before != want:
                    raise Invalid("Atlas's usage is not the actual per request: a reservation was not settled")
            bad = {n: c for n, c in counts.items() if c["throttled"] or c["failed"]}
            if bad:
                raise Invalid(f"a side throttled or failed during the measurement: {bad}")
            return 0
        finally:
            stop.close()  # the ext_procs flush their events before the portal stops
            cleanup(gun, prefix, ab.TMP)
            shutil.rmtree(work, ignore_errors=True)
            if args.atlas_url and not args.atlas_key:
                atlas_forget(args.atlas_redis_url, key)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--serve-upstream", type=int, metavar="PORT", help="only serve the canned upstream on PORT")
    ap.add_argument("--atlas-url", help="a running Atlas gateway, e.g. http://127.0.0.1:8080")
    ap.add_argument(
        "--upstream-port",
        type=int,
        help="Atlas's upstream here (Headroom's Envoy uses it too); its CPU is printed apart",
    )
    ap.add_argument("--no-atlas", action="store_true", help="the two Headroom sides alone (a check of the bench)")
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
    if not args.atlas_url and not args.no_atlas:
        ap.error("give --atlas-url (or --no-atlas)")
    if args.atlas_url and not (args.atlas_admin_key or args.atlas_key):
        ap.error("give --atlas-admin-key or --atlas-key")
    if not args.upstream_port:
        ap.error("give --upstream-port: the upstream Atlas proxies to, which Headroom's Envoy proxies to as well")
    if args.rounds < 6:
        ap.error("--rounds must be ≥ 6")
    try:
        return run(args)
    except Invalid as exc:
        print(f"!! not a valid measurement: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
