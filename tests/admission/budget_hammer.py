"""Worker for the budget load test (issue 23): threads reserving against one budgeted scope in Redis
while the store's clock crosses a period boundary (RedisBackend.period_offset_s puts the boundary
a few seconds into the run; Redis' own clock decides when it passes).

Runs in a spawned process (no Django). Every admission is completed at once with an actual at or
below its estimate (a refund of 0-60 %), so a budget can only be exceeded by a wrong admission.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

from admission.backends.base import Bucket, CompleteOp, Limits, Period, ReserveOp, Scope, StoreUnavailable
from admission.backends.redis import RedisBackend
from capacity.periods import DAILY

COST, TTL, LIMIT = 100.0, 600.0, 20_000.0
RPS, BURST = 40.0, 20.0  # the request-rate scope: admits in [t0, t1] ≤ BURST + RPS × (t1 − t0)


def scopes(prefix: str) -> tuple[Scope, Scope]:
    base = {"max_concurrency": 64, "traffic_class": "reserved", "pool": Bucket(f"{prefix}p:1", 1e9, 1e12),
            "borrow": None, "margin": 0.0, "degraded": False, "reserved_floor": 0.0, "ttl_s": TTL, "idem_ttl_s": 60,
            "w_out": 4.0, "w_cached": 0.0}  # fmt: skip
    budget = Scope(inflight_key=f"{prefix}if:b", own=Bucket(f"{prefix}b:b", 1e9, 1e12), **base,  # type: ignore[arg-type]
                   limits=Limits("wt", "UTC", (Period(DAILY, f"{prefix}bd:b:d", LIMIT),)))  # fmt: skip
    rps = Scope(inflight_key=f"{prefix}if:r", own=Bucket(f"{prefix}b:r", 1e9, 1e12), **base,  # type: ignore[arg-type]
                limits=Limits("wt", "UTC", (), Bucket(f"{prefix}rq:r", RPS, BURST)))  # fmt: skip
    return budget, rps


def run(url: str, prefix: str, offset, threads: int, seconds: float, out, ready, go) -> None:  # type: ignore[no-untyped-def]
    """`offset` (a shared double) is set by the parent once every process is ready (`ready`), then `go` is
    set: the boundary's lead then counts from when the hammering starts, however slowly processes spawn."""
    backend = RedisBackend(url, prefix=prefix, socket_timeout=2.0)
    backend.ping()
    ready.put(1)
    go.wait()
    backend.period_offset_s = offset.value
    budget, rps = scopes(prefix)
    lock = threading.Lock()
    acc = {"admits": [], "rps_admits": [], "throttles": {}, "rps_throttles": {}, "errors": 0, "fail_open": 0,
           "attempts": {"budget": 0, "rps": 0}}  # fmt: skip
    deadline = time.monotonic() + seconds

    def worker(i: int) -> None:
        rnd = random.Random(i)
        scope = rps if i % 4 == 0 else budget  # a quarter of the threads on the request-rate scope
        tried = 0
        while time.monotonic() < deadline:
            tried += 1
            try:
                a = backend.reserve(ReserveOp(scope, uuid.uuid4().hex, COST, "{}", COST))
            except StoreUnavailable:
                with lock:
                    acc["fail_open"] += 1
                continue
            p = a.parts()
            if not a.admitted:
                with lock:
                    acc["throttles"][p[1]] = acc["throttles"].get(p[1], 0) + 1
                    if scope is rps:
                        acc["rps_throttles"][p[1]] = acc["rps_throttles"].get(p[1], 0) + 1
                continue
            at = float(p[4]) - TTL  # Redis' clock at the admission
            out_tokens = rnd.randint(5, 20)  # actual 20 + 4 × out: 40-100 wt, never above the estimate
            try:
                s = backend.complete(CompleteOp(p[1], 20, 0, out_tokens, "ok", 60))
            except StoreUnavailable:
                with lock:
                    acc["fail_open"] += 1
                continue
            with lock:
                if scope is rps:
                    acc["rps_admits"].append(at)
                else:
                    acc["admits"].append((at, COST, s.result["actual_wt"] if s else None))
        with lock:
            acc["attempts"]["rps" if scope is rps else "budget"] += tried

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(acc)
