"""Done-when: 2 processes × 16 threads against real Redis for 10 s at a known entitlement rate, with
the production client timeout: no over-admission, the concurrency cap held, and 0 fail-open
admissions while Redis is up (issue 12.1; with the old 50 ms timeout 26 of 185 admits failed open)."""

from __future__ import annotations

import multiprocessing as mp
import uuid

import pytest

from tests.admission import hammer
from tests.admission.cluster import client_for, store_url


@pytest.mark.redis
@pytest.mark.slow
def test_two_processes_never_over_admit_exceed_the_cap_or_fail_open_while_redis_is_up(redis_url):
    redis_url = store_url(redis_url)  # REDIS_CLUSTER_URL: the same load on a Redis Cluster
    prefix = f"load{uuid.uuid4().hex[:8]}:"
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=hammer.run, args=(redis_url, prefix, 16, 10.0, q)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    client = client_for(redis_url)
    violations = int(client.get(f"{prefix}violations") or 0)
    for k in client.scan_iter(match=prefix + "*"):
        client.delete(k)

    times = sorted(t for r in results for t in r["admit_times"])
    admitted = sum(r["admitted_wt"] for r in results)
    bound = hammer.DEPTH + hammer.RATE * (times[-1] - times[0])
    throttles: dict[str, int] = {}
    for r in results:
        for k, v in r["throttles"].items():
            throttles[k] = throttles.get(k, 0) + v
    fail_open = sum(r["fail_open"] for r in results)
    lat = sorted(x for r in results for x in r["latencies_ms"])
    print(f"admitted {admitted:.0f} wt over {times[-1] - times[0]:.2f} s (bound {bound:.0f}); throttles {throttles}; "
          f"fail_open {fail_open}; reserve p99 {lat[int(len(lat) * 0.99)]:.1f} ms, max {lat[-1]:.1f} ms")  # fmt: skip
    assert sum(r["errors"] for r in results) == 0
    assert fail_open == 0  # Redis was up all along: nothing may fail open
    assert [r["breaker"]["opened"] for r in results] == [0, 0]
    assert admitted <= bound + 1e-6  # 0 over-admission
    assert admitted > hammer.DEPTH  # the bucket refilled and kept admitting: the load was real
    assert violations == 0  # the in-flight cap was never exceeded
    assert set(throttles) <= {"QUOTA_EXCEEDED", "CONCURRENCY_LIMIT"} and throttles["QUOTA_EXCEEDED"] >= 1
