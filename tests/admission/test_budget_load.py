"""Done-when for issue 23: 2 processes × 16 threads against real Redis while a daily boundary passes
on the store's clock: no period is ever charged over its budget, the new period opens with the whole
budget at the boundary (not before), every refund lands, and the request rate is never exceeded."""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from datetime import UTC, datetime

import pytest
import redis

from admission.backends.redis import RedisBackend
from capacity.periods import DAILY, period_id, period_start
from tests.admission import budget_hammer as bh

LEAD_S, RUN_S = 4.0, 9.0  # the boundary passes LEAD_S into a RUN_S run


@pytest.mark.redis
@pytest.mark.slow
def test_two_processes_never_spend_over_a_budget_across_the_boundary(redis_url):
    prefix = f"bload{uuid.uuid4().hex[:8]}:"
    boundary = datetime(2026, 12, 2, tzinfo=UTC).timestamp()  # virtual: a UTC midnight
    ctx = mp.get_context("spawn")
    q, ready, go, shared_offset = ctx.Queue(), ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=bh.run, args=(redis_url, prefix, shared_offset, 16, RUN_S, q, ready, go)) for _ in range(2)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)  # spawned and connected: the lead below is all hammering, at any load
    offset = boundary - (time.time() + LEAD_S)
    real_boundary = boundary - offset
    shared_offset.value = offset
    go.set()
    results = [q.get() for _ in procs]
    for p in procs:
        p.join()
    client = redis.Redis.from_url(redis_url)
    keys = [f"{prefix}bd:b:d:{period_id(DAILY, period_start(DAILY, t, 'UTC'))}" for t in (boundary - 1, boundary + 1)]
    # Read where the store keeps a period's spend (a field of the scope's hash since issue 49.1), as the
    # backend does: reading the key by hand would read 0 and prove nothing.
    used = [RedisBackend(redis_url, prefix=prefix).used(k) or 0.0 for k in keys]
    for k in client.scan_iter(match=prefix + "*"):
        client.delete(k)

    admits = [a for r in results for a in r["admits"]]
    before = [a for a in admits if a[0] < real_boundary]
    after = [a for a in admits if a[0] >= real_boundary]
    throttles: dict[str, int] = {}
    for r in results:
        for k, v in r["throttles"].items():
            throttles[k] = throttles.get(k, 0) + v
    print(f"admits {len(before)} + {len(after)}, used {used}, throttles {throttles}")
    assert sum(r["errors"] + r["fail_open"] for r in results) == 0
    # Every attempt is answered: on the budget scope each one not admitted is a BUDGET_EXHAUSTED, nothing else
    attempts = {k: sum(r["attempts"][k] for r in results) for k in ("budget", "rps")}
    budget_throttles = {k: v - sum(r["rps_throttles"].get(k, 0) for r in results) for k, v in throttles.items()}
    assert {k: v for k, v in budget_throttles.items() if v} == {"BUDGET_EXHAUSTED": attempts["budget"] - len(admits)}
    assert budget_throttles["BUDGET_EXHAUSTED"] >= 1 and before and after  # spent, then reopened by the boundary
    for period, u in zip((before, after), used, strict=True):
        estimates = sum(a[1] for a in period)
        actuals = sum(a[2] for a in period)
        assert u <= bh.LIMIT  # never over the budget (no overruns here: only refunds)
        assert actuals - 1e-6 <= u <= estimates + 1e-6  # estimates charged, refunds taken back
        assert estimates > bh.LIMIT - bh.COST  # the period's budget was used up: the load was real
    # Everything admitted after the boundary also settled in the same period: every refund landed.
    assert used[1] == pytest.approx(sum(a[2] for a in after), abs=1e-6)
    rps = sorted(t for r in results for t in r["rps_admits"])
    assert rps and len(rps) <= bh.BURST + bh.RPS * (rps[-1] - rps[0]) + 1e-6
    assert throttles.get("QUOTA_EXCEEDED", 0) == attempts["rps"] - len(rps)  # every rate-scope attempt not admitted
    assert attempts["rps"] > len(rps)  # the rate was hit
    # Every refusal on the request-rate scope is the rate's QUOTA_EXCEEDED, and every QUOTA_EXCEEDED came from it.
    rps_throttles: dict[str, int] = {}
    for r in results:
        for k, v in r["rps_throttles"].items():
            rps_throttles[k] = rps_throttles.get(k, 0) + v
    assert rps_throttles == {"QUOTA_EXCEEDED": throttles["QUOTA_EXCEEDED"]}
