"""Borrowing and reclaim on a simulated clock (in-process backend), so every step is exact.

World (see world.py): pool 280 wt/s, depth 16,800, reclaim margin 3,360. Lender acme reserved
200 wt/s (depth 12,000). Borrowers (only best_effort borrows): globex 50 wt/s + 50 wt/s borrowing; initech
best_effort 10 wt/s + 100 wt/s borrowing. Borrowers alone (210 wt/s) fit in the pool; with the
lender back (410 wt/s) they do not, and must be cut.
"""

from __future__ import annotations

import pytest

from admission import backends, keys, params, reclaims, services
from admission.backends.memory import MemoryBackend
from admission.models import ReclaimEvent
from tests.admission.world import body, build_world, grant
from tests.factories import TenantFactory

TICK = 0.125  # exact in binary, so refills of 200 wt/s × TICK = 25 wt are exact too


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_700_000_000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def sim(fleet, sink):
    clock = FakeClock()
    reclaims.reset()
    prev = backends.set_backend(MemoryBackend(clock=clock))
    params.invalidate()
    w = build_world(fleet)
    grant(fleet, w.pool, TenantFactory(slug="initech"), "0.01", "best_effort", overage="borrow",
          borrowing_limit_cu="0.1")  # fmt: skip
    yield w, clock
    backends.set_backend(prev)
    params.invalidate()


class Driver:
    def __init__(self) -> None:
        self.n = 0
        self.log: list[tuple[float, str, str]] = []  # (t, tenant, source or reason)

    def call(self, t: float, tenant: str, cls: str, prompt: int, out: int) -> str:
        self.n += 1
        d = services.reserve(services.parse_reserve(body(tenant, cls, f"{tenant}-{self.n}", prompt=prompt, out=out)))
        if d.status == 200:
            # Settle at exactly the estimate: no refund, so admitted wt is what was used.
            services.complete(services.parse_complete({"reservation_id": d.body["reservation_id"],
                              "prompt_tokens": prompt, "output_tokens": out, "status": "ok"}))  # fmt: skip
            got = d.body["source"]
        else:
            got = d.body["reason"]
        self.log.append((t, tenant, got))
        return got

    def push_borrowers(self, t: float) -> None:
        """Each borrower sends 100-wt requests until refused, every tick: as hard as it can."""
        for tenant, cls in (("globex", "best_effort"), ("initech", "best_effort")):
            for _ in range(20):
                if self.call(t, tenant, cls, 20, 20) not in ("entitlement", "borrowed"):
                    break

    def outcomes(self, tenant: str, since: float = 0.0) -> list[str]:
        return [g for t, who, g in self.log if who == tenant and t >= since]


def pool_level(w) -> float:
    return backends.get_backend().level(keys.pool(keys.tag("adm:", w.pool.pk)))


def test_lender_at_its_rate_is_never_throttled_however_hard_borrowers_push(sim):
    w, clock = sim
    d = Driver()
    for _ in range(80):  # borrowers alone for 10 s
        d.push_borrowers(clock.t)
        clock.t += TICK
    t0 = clock.t
    for _ in range(12):  # the lender spends its whole bucket at once …
        assert d.call(clock.t, "acme", "reserved", 200, 200) == "entitlement"
    lowest = pool_level(w)
    clock.t += TICK
    for _ in range(480):  # … then 60 s at exactly its rate: 25 wt per 1/8 s = 200 wt/s
        assert d.call(clock.t, "acme", "reserved", 25, 0) == "entitlement"
        d.push_borrowers(clock.t)
        lowest = min(lowest, pool_level(w))
        clock.t += TICK
    assert set(d.outcomes("acme")) == {"entitlement"}
    assert len(d.outcomes("acme")) == 12 + 480
    assert "borrowed" in d.outcomes("globex") and "borrowed" in d.outcomes("initech")
    assert d.outcomes("initech", since=t0).count("RECLAIMED") >= 480  # refused every tick once the lender is back
    assert "borrowed" not in d.outcomes("initech", since=t0)
    assert lowest < 0  # the lender's admissions went into pool debt rather than being refused


def test_reclaim_latency_is_measured_and_recorded(sim):
    w, clock = sim
    d = Driver()
    for _ in range(240):  # 30 s of borrowers alone: no reclaim
        d.push_borrowers(clock.t)
        clock.t += TICK
    assert "RECLAIMED" not in d.outcomes("globex") + d.outcomes("initech")
    t0 = clock.t  # the lender returns, at exactly its rate (no burst)
    t1 = None
    while t1 is None:
        d.call(clock.t, "acme", "reserved", 25, 0)
        d.push_borrowers(clock.t)
        if any(t == clock.t and g == "RECLAIMED" for t, _, g in d.log):
            t1, level_at_cut = clock.t, pool_level(w)
        clock.t += TICK
    # The serving path measured it: the lender's return at t0 (after 30 s without it), the first cut at t1.
    row = ReclaimEvent.objects.get()
    # The cut comes exactly when a 100-wt borrow would leave less than the margin in the pool, not earlier.
    assert level_at_cut - 100 < 3360
    assert "borrowed" in [g for t, _, g in d.log if t0 <= t < t1]
    assert (row.pool_id, row.latency_ms) == (w.pool.pk, (t1 - t0) * 1000)
    assert t1 - t0 >= TICK  # borrowers were cut only after the lender came back
    assert row.borrowers_cut == 1
    assert set(d.outcomes("acme")) == {"entitlement"}
    print(f"reclaim latency {row.latency_ms:.0f} ms (simulated clock), borrowers cut {row.borrowers_cut}")
