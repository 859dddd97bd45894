"""Worker for the multi-process load tests: threads reserving against one entitlement in Redis.

Runs in a spawned process (no Django setup needed: the Redis backend is plain Python). Uses the
production client timeout unless told otherwise; a `StoreUnavailable` is what the serving path
would turn into a fail-open admission, so it is counted as `fail_open`. Each reserve's latency is
kept (`latencies_ms`): that is how the timeout in admission/backends/redis.py was measured.
"""

from __future__ import annotations

import threading
import time
import uuid

from admission import keys
from admission.backends.base import Bucket, CompleteOp, ReserveOp, Scope, StoreUnavailable, Where
from admission.backends.redis import RedisBackend
from tests.admission.cluster import client_for

RATE, DEPTH, COST, MAXC, TTL = 1000.0, 60_000.0, 100.0, 8, 600.0


def run(url: str, prefix: str, threads: int, seconds: float, out, timeout: float | None = None) -> None:  # type: ignore[no-untyped-def]
    backend = (
        RedisBackend(url, prefix=prefix)
        if timeout is None
        else RedisBackend(url, prefix=prefix, socket_timeout=timeout)
    )
    counter = client_for(url)
    lock = threading.Lock()
    acc = {"admitted_wt": 0.0, "admits": 0, "throttles": {}, "violations": 0, "errors": 0, "fail_open": 0,
           "admit_times": [], "latencies_ms": []}  # fmt: skip
    deadline = time.monotonic() + seconds
    t = keys.tag(prefix, 1)  # one pool: every key in one slot (one node of a cluster)
    scope = Scope(
        inflight_key=keys.inflight(t, "s"), max_concurrency=MAXC, traffic_class="reserved",
        own=Bucket(keys.own(t, "s"), RATE, DEPTH), pool=Bucket(keys.pool(t), 1e6, 6e7), borrow=None,
        margin=0.0, degraded=False, reserved_floor=0.0, ttl_s=TTL, idem_ttl_s=60, w_out=4.0, w_cached=0.0, tag=t,
    )  # fmt: skip
    where = Where(t, scope.inflight_key, scope.own.key, scope.pool.key)

    def worker() -> None:
        lat: list[float] = []
        while time.monotonic() < deadline:
            o = ReserveOp(scope, uuid.uuid4().hex, COST, "{}")
            t0 = time.perf_counter()
            try:
                a = backend.reserve(o)
            except StoreUnavailable:
                with lock:
                    acc["fail_open"] += 1
                continue
            except Exception:
                with lock:
                    acc["errors"] += 1
                continue
            lat.append((time.perf_counter() - t0) * 1000)
            p = a.parts()
            if not a.admitted:
                with lock:
                    acc["throttles"][p[1]] = acc["throttles"].get(p[1], 0) + 1
                continue
            # A test-side count of in-flight requests, kept in Redis so both processes share it.
            if counter.incr(f"{prefix}held") > MAXC:
                counter.incr(f"{prefix}violations")
            time.sleep(0.001)
            counter.decr(f"{prefix}held")
            try:
                backend.complete(CompleteOp(p[1], 20, 0, 20, "ok", 60, where=where))  # actual = estimate: no refund
            except StoreUnavailable:
                with lock:
                    acc["fail_open"] += 1
            with lock:
                acc["admitted_wt"] += float(p[2])
                acc["admits"] += 1
                acc["admit_times"].append(float(p[4]) - TTL)  # Redis' clock at the admission
        with lock:
            acc["latencies_ms"].extend(lat)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    acc["breaker"] = dict(backend.breaker.counts)
    out.put(acc)
