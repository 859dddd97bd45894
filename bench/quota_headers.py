"""Issue 36.2: what the remaining-quota headers cost a reserve (goal: with / without ≥ 0.95).

The headers come from the reserve script's own reply (reserve.lua's quota(): no extra round trip),
so the price is the script building one more string and Python turning it into headers. Measured
here on a real Redis: `threads` threads in this process call RedisBackend.reserve (EVALSHA
reserve.lua) and, with headers, admission.core.quota_headers on its answer; without, the same op
with `quota=False`. In each round every thread alternates timed batches of 16 reserves with and
without (half the threads starting with each), so both sides run at the same moments under the same
contention and the machine's load hits both alike; the load average is printed beside each round,
with its ratio; the goal is read on the median of the rounds' ratios (the totals are printed too). Every run starts from an emptied
keyspace (each throttle leaves a record key). Two scopes: one with only a
token rate (the common case) and one with a request rate and daily + monthly budgets (most values
to report); two outcomes: admits (the hot path), and throttles (an empty bucket: the script reads
the request bucket and the periods it had not read yet).

Each case also runs one thread call by call, with and without alternating (medians: steadier than
throughput on a loaded machine), timing the header formatting alone, and reads the client's own CPU
per call each way (what the headers cost the gateway's process, apart from Redis).

    .venv/bin/python bench/quota_headers.py [--redis redis://127.0.0.1:6379/0] [--rounds 6] [--round-s 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from admission import core  # noqa: E402
from admission.backends.base import Bucket, Limits, Period, ReserveOp, Scope  # noqa: E402
from admission.backends.redis import RedisBackend  # noqa: E402


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def scope(prefix: str, name: str, *, limits: bool, admit: bool) -> Scope:
    t = f"{prefix}{{bench-{name}}}:"
    own = Bucket(t + "b", 1e9, 1e12) if admit else Bucket(t + "b", 0.0, 1.0)  # throttles: 1 wt, never refilled
    lim = None
    if limits:
        lim = Limits("wt", "UTC", (Period("daily", t + "bd:d", 1e15), Period("monthly", t + "bd:m", 1e15)),
                     Bucket(t + "rq", 1e9, 1e12))  # fmt: skip
    return Scope(inflight_key=t + "if", max_concurrency=10**9, traffic_class="reserved", own=own,
                 pool=Bucket(t + "p", 1e9, 1e12), borrow=None, margin=0.0, degraded=False, reserved_floor=0.0,
                 ttl_s=600.0, idem_ttl_s=60, w_out=4.0, w_cached=0.0, limits=lim, tag=t)  # fmt: skip


def run(b: RedisBackend, s: Scope, threads: int, seconds: float, batch: int = 16) -> dict[bool, list[float]]:
    """`threads` threads for `seconds`, each alternating batches of `batch` reserves with and without the
    headers (half the threads start with each), timing every batch: both sides run at the same moments
    under the same contention, so the GIL's hand-offs and the machine's load fall on both alike (whole
    rounds of one side, then the other, swung 0.4-1.4 round to round on the same code). → {side:
    [reserves, seconds spent]} summed over the threads."""
    stop = time.monotonic() + seconds
    tally = [{True: [0, 0.0], False: [0, 0.0]} for _ in range(threads)]

    names = core.quota_names(s)  # as the scope's plan holds them

    def go(k: int) -> None:
        n, tag, mine = 0, uuid.uuid4().hex[:8], tally[k]
        ops = {q: ReserveOp(s, "", 100.0, "{}", 100.0, None, q) for q in (True, False)}
        order = (True, False) if k % 2 == 0 else (False, True)
        while time.monotonic() < stop:
            for q in order:
                base, t0 = ops[q], time.perf_counter()
                for _ in range(batch):
                    a = b.reserve(dataclasses.replace(base, reservation_id=f"{tag}-{n}"))
                    if a.quota is not None:
                        core.quota_headers(names, a.quota)
                    n += 1
                mine[q][1] += time.perf_counter() - t0
                mine[q][0] += batch
            order = order[::-1]

    ts = [threading.Thread(target=go, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {q: [sum(m[q][0] for m in tally), sum(m[q][1] for m in tally)] for q in (True, False)}


def cpu(b: RedisBackend, s: Scope, calls: int, batch: int = 200) -> tuple[float, float]:
    """This thread's CPU per reserve (time.thread_time: the client's own work, not the wait for Redis), with
    and without, in alternating batches. → µs per call (with, without)."""
    tag, got, names = uuid.uuid4().hex[:8], {True: 0.0, False: 0.0}, core.quota_names(s)
    for r in range(calls // batch):
        for q in (True, False) if r % 2 else (False, True):
            base, t0 = ReserveOp(s, "", 100.0, "{}", 100.0, None, q), time.thread_time()
            for i in range(batch):
                a = b.reserve(dataclasses.replace(base, reservation_id=f"{tag}-{r}-{i}-{q:d}"))
                if a.quota is not None:
                    core.quota_headers(names, a.quota)
            got[q] += time.thread_time() - t0
    n = calls // batch * batch
    return got[True] / n * 1e6, got[False] / n * 1e6


def latency(b: RedisBackend, s: Scope, pairs: int) -> tuple[float, float, float]:
    """One thread, call by call: with and without alternating (order swapped each pair), so both see
    the same moment's load. → (p50 with, p50 without, p50 of the header formatting alone), µs."""
    base = ReserveOp(s, "", 100.0, "{}", 100.0, None, True)
    tag, names = uuid.uuid4().hex[:8], core.quota_names(s)
    took: dict[bool, list[float]] = {True: [], False: []}
    fmt: list[float] = []
    for i in range(pairs):
        for q in (True, False) if i % 2 else (False, True):
            t0 = time.perf_counter()
            a = b.reserve(dataclasses.replace(base, reservation_id=f"{tag}-{i}-{q:d}", quota=q))
            t1 = time.perf_counter()
            if a.quota is not None:
                core.quota_headers(names, a.quota)
            t2 = time.perf_counter()
            took[q].append(t2 - t0)
            if q:
                fmt.append(t2 - t1)
    return (statistics.median(took[True]) * 1e6, statistics.median(took[False]) * 1e6, statistics.median(fmt) * 1e6)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--round-s", type=float, default=2.0)
    ap.add_argument("--pairs", type=int, default=2000)
    args = ap.parse_args()
    prefix = f"benchq-{uuid.uuid4().hex[:6]}:"
    b = RedisBackend(args.redis, prefix=prefix, socket_timeout=2.0)
    print(f"remaining-quota headers: reserve with vs without, {args.threads} threads, {args.rounds} rounds of "
          f"{args.round_s:.1f} s, every thread alternating batches with and without; {load()}")  # fmt: skip
    ratios = []
    try:
        for limits in (False, True):
            for admit in (True, False):
                s = scope(prefix, f"{int(limits)}{int(admit)}", limits=limits, admit=admit)
                run(b, s, args.threads, 0.5)  # warm: connections, the script loaded
                tot = {True: [0, 0.0], False: [0, 0.0]}
                per_round = []
                for r in range(args.rounds):
                    # Each round starts from the same keyspace: a throttle leaves a record for up to an
                    # hour, and Redis growing its key table mid-run slowed whichever side ran then.
                    b.clear()
                    got = run(b, s, args.threads, args.round_s)
                    for q in (True, False):
                        tot[q][0] += got[q][0]
                        tot[q][1] += got[q][1]
                    per_round.append((got[True][0] / got[True][1]) / (got[False][0] / got[False][1]))
                    print(f"    round {r + 1}: ratio {per_round[-1]:.3f}; {load()}")
                ratio = statistics.median(per_round)
                ratios.append(ratio)
                what = ("token rate, request rate, 2 budgets" if limits else "token rate only") + (
                    "; admits" if admit else "; throttles"
                )
                w_s, wo_s = (tot[q][0] / tot[q][1] * args.threads for q in (True, False))
                print(f"  {what:<46} with {w_s:8,.0f}/s  without {wo_s:8,.0f}/s  "
                      f"(totals {w_s / wo_s:.3f}); median of the rounds' ratios {ratio:.3f} (goal ≥ 0.95)")  # fmt: skip
                b.clear()
                cw, cwo = cpu(b, s, args.pairs * 2)
                print(f"  {'':<46} client CPU per call, {args.pairs * 2:,} calls each way in alternating batches: "
                      f"{cw:.1f} vs {cwo:.1f} µs (+{cw - cwo:.1f}); {load()}")  # fmt: skip
                w, wo, f = latency(b, s, args.pairs)
                print(f"  {'':<46} one thread, {args.pairs:,} interleaved pairs: p50 {w:.1f} vs {wo:.1f} µs, "
                      f"{wo / w:.3f} (formatting the headers {f:.1f} µs); {load()}")  # fmt: skip
    finally:
        b.clear()
    print(f"  worst ratio {min(ratios):.3f}; {load()}")
    return 0 if min(ratios) >= 0.95 else 1


if __name__ == "__main__":
    raise SystemExit(main())
