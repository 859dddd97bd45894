"""Period budgets and the request rate (issue 23) in the contract suite: both backends, one script each.

Bucket rates are 0 here, so levels are exact. Time is driven per backend (`Clock`): the in-process
store's clock is replaced by a held one; on Redis the periods are computed around a shifted Python
clock (RedisBackend.period_offset_s) while Redis' own clock still decides when a period changes, so
a boundary test waits (a few seconds) for Redis' clock to pass it.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from admission.backends.base import NO_OUTPUT_CAP, Bucket, CompleteOp, Limits, Lost, Period, ReserveOp, Scope, Where
from entitlements import limits

MARGIN_S = 5.0  # how far before a boundary a Redis test starts: its requests must all land before it


class Clock:
    """Virtual time for a store: held still on the in-process store, shifted (and running) on Redis."""

    def __init__(self, store) -> None:
        self.store = store
        self.redis = hasattr(store, "client")

    def at(self, epoch: float) -> None:
        if self.redis:
            self.store.period_offset_s = epoch - time.time()
        else:
            self.store.clock = lambda: epoch

    def now(self) -> float:
        return time.time() + self.store.period_offset_s if self.redis else self.store.clock()

    def past(self, epoch: float) -> None:
        """Let virtual time pass `epoch` (Redis: wait for its clock; in-process: move the held one)."""
        if not self.redis:
            self.at(epoch + 0.5)
            return
        while self.now() < epoch + 0.2:
            time.sleep(0.1)


def before(clock: Clock, boundary: datetime) -> float:
    """Put virtual time just before `boundary`; → the boundary as epoch seconds."""
    b = boundary.timestamp()
    clock.at(b - (MARGIN_S if clock.redis else 1.0))
    return b


def lop(store, *, cost=100.0, units=None, unit="wt", daily=None, monthly=None, tz="UTC", rps=None, scope="s1",
        req=None, cls="reserved", own=(0.0, 10**9), borrow=None) -> ReserveOp:  # fmt: skip
    p = store.prefix
    periods = []
    if daily is not None:
        periods.append(Period(limits.DAILY, f"{p}bd:{scope}:d", float(daily)))
    if monthly is not None:
        periods.append(Period(limits.MONTHLY, f"{p}bd:{scope}:m", float(monthly)))
    rq = Bucket(f"{p}rq:{scope}", *rps) if rps else None
    return ReserveOp(
        scope=Scope(
            inflight_key=f"{p}if:{scope}", max_concurrency=1000, traffic_class=cls,
            own=Bucket(f"{p}b:{scope}", *own), pool=Bucket(f"{p}p:1", 0.0, 10**12),
            borrow=Bucket(f"{p}bb:{scope}", *borrow) if borrow else None,
            margin=0.0, degraded=False, reserved_floor=0.0, ttl_s=600.0, idem_ttl_s=60, w_out=4.0, w_cached=0.5,
            max_output=NO_OUTPUT_CAP, limits=Limits(unit, tz, tuple(periods), rq),
        ),
        reservation_id=req or uuid.uuid4().hex, cost=cost, meta=json.dumps({"scope": scope}),
        units=cost if units is None else units,
    )  # fmt: skip


def used(store, clock: Clock, scope="s1", kind=limits.DAILY, tz="UTC"):
    pid = limits.period_id(kind, limits.period_start(kind, clock.now(), tz))
    return store.used(f"{store.prefix}bd:{scope}:{'d' if kind == limits.DAILY else 'm'}:{pid}")


def complete(store, rid, prompt=10, cached=0, output=10):
    return store.complete(CompleteOp(rid, prompt, cached, output, "ok", 60))


def noon(clock: Clock) -> None:
    """Mid-day, mid-month (UTC): far from any boundary, so a test's periods cannot change under it."""
    clock.at(datetime(2026, 12, 15, 12, tzinfo=UTC).timestamp())


def test_daily_budget_charges_the_estimate_then_throttles_to_the_boundary(store):
    clock = Clock(store)
    noon(clock)
    got = [store.reserve(lop(store, cost=400.0, daily=1000)).raw for _ in range(3)]
    assert [g[0] for g in got] == ["A", "A", "T"]
    reason, retry = got[2].split("|")[1:3]
    assert reason == "BUDGET_EXHAUSTED"
    assert 12 * 3600 - 60 <= int(retry) <= 12 * 3600  # to midnight UTC
    assert used(store, clock) == 800.0
    assert store.level(f"{store.prefix}b:s1") == 10**9 - 800.0  # the rate bucket paid the same estimates


def test_complete_refunds_or_charges_the_difference_and_debt_is_bounded(store):
    clock = Clock(store)
    noon(clock)
    a = store.reserve(lop(store, cost=600.0, daily=1000))
    b = store.reserve(lop(store, cost=300.0, daily=1000))
    complete(store, a.parts()[1], prompt=100, cached=20, output=50)  # 290 wt: 310 back
    assert used(store, clock) == 590.0
    assert store.reserve(lop(store, cost=400.0, daily=1000)).admitted  # 990
    complete(store, b.parts()[1], prompt=10, output=10**6)  # a huge overrun: use stops at 2 × limit
    assert used(store, clock) == 2000.0
    assert store.reserve(lop(store, cost=1.0, daily=1000)).raw.startswith("T|BUDGET_EXHAUSTED|")


def test_a_budget_resets_at_its_boundary_and_never_in_between(store):
    clock = Clock(store)
    clock.at(datetime(2026, 12, 1, 6, tzinfo=UTC).timestamp())
    assert store.reserve(lop(store, cost=1000.0, daily=1000)).admitted
    assert store.reserve(lop(store, cost=1.0, daily=1000)).raw.startswith("T|BUDGET_EXHAUSTED|")
    b = before(clock, datetime(2026, 12, 2, tzinfo=UTC))
    # Nearly a day later, still the same day: nothing refilled (a rate bucket would be full by now).
    t = store.reserve(lop(store, cost=1.0, daily=1000)).raw
    assert t.startswith("T|BUDGET_EXHAUSTED|") and 1 <= int(t.split("|")[2]) <= MARGIN_S
    clock.past(b)
    assert store.reserve(lop(store, cost=1000.0, daily=1000)).admitted  # a new day: the whole budget
    assert used(store, clock) == 1000.0


def test_monthly_budget_resets_at_the_month_boundary_only(store):
    clock = Clock(store)
    clock.at(datetime(2026, 11, 30, 12, tzinfo=UTC).timestamp())
    assert store.reserve(lop(store, cost=700.0, daily=800, monthly=1000)).admitted
    b = before(clock, datetime(2026, 12, 1, tzinfo=UTC))
    clock.past(b)  # a new day and a new month: both reset
    assert store.reserve(lop(store, cost=800.0, daily=800, monthly=1000)).admitted
    before(clock, datetime(2026, 12, 2, tzinfo=UTC))
    clock.past(datetime(2026, 12, 2, tzinfo=UTC).timestamp())  # a new day, the same month
    t = store.reserve(lop(store, cost=300.0, daily=800, monthly=1000)).raw
    assert t.startswith("T|BUDGET_EXHAUSTED|")
    assert 29 * 86400 - 60 <= int(t.split("|")[2]) <= 30 * 86400  # to January 1st, not to tomorrow
    assert store.reserve(lop(store, cost=200.0, daily=800, monthly=1000)).admitted


def test_the_boundary_is_midnight_in_the_budget_time_zone(store):
    clock = Clock(store)
    tokyo = ZoneInfo("Asia/Tokyo")
    kw = {"daily": 100, "tz": "Asia/Tokyo"}
    clock.at(datetime(2026, 12, 1, 6, tzinfo=tokyo).timestamp())
    assert store.reserve(lop(store, cost=100.0, **kw)).admitted
    # Midnight UTC (09:00 in Tokyo, the same Tokyo day) is no boundary for this budget.
    clock.past(before(clock, datetime(2026, 12, 1, tzinfo=UTC)))
    t = store.reserve(lop(store, cost=1.0, **kw)).raw
    assert t.startswith("T|BUDGET_EXHAUSTED|") and 15 * 3600 - 60 <= int(t.split("|")[2]) <= 15 * 3600  # to 00:00 JST
    b = before(clock, datetime(2026, 12, 2, tzinfo=tokyo))
    assert store.reserve(lop(store, cost=1.0, **kw)).raw.startswith("T|BUDGET_EXHAUSTED|")
    clock.past(b)
    assert store.reserve(lop(store, cost=100.0, **kw)).admitted


def test_units_tokens_and_requests_count_what_they_say(store):
    clock = Clock(store)
    noon(clock)
    # tokens: prompt + output as reported (cached prompt tokens count), whatever the weights.
    a = store.reserve(lop(store, cost=500.0, units=150.0, unit="tokens", daily=1000, scope="t"))
    assert used(store, clock, "t") == 150.0
    complete(store, a.parts()[1], prompt=100, cached=40, output=30)  # 130 tokens (wt: 60 + 20 + 120 = 200)
    assert used(store, clock, "t") == 130.0
    # requests: one each, whatever the tokens; complete changes nothing.
    for _ in range(3):
        r = store.reserve(lop(store, cost=500.0, units=1.0, unit="requests", daily=3, scope="r"))
        complete(store, r.parts()[1], prompt=10**6, output=10**6)
    assert used(store, clock, "r") == 3.0
    assert store.reserve(lop(store, cost=1.0, units=1.0, unit="requests", daily=3, scope="r")).raw.startswith(
        "T|BUDGET_EXHAUSTED|"
    )
    # wt: the settled weighted tokens.
    w = store.reserve(lop(store, cost=500.0, daily=1000, scope="w"))
    complete(store, w.parts()[1], prompt=100, cached=40, output=30)
    assert used(store, clock, "w") == 200.0


def test_a_complete_after_the_boundary_leaves_the_new_period_alone(store):
    clock = Clock(store)
    b = before(clock, datetime(2026, 12, 16, tzinfo=UTC))
    a = store.reserve(lop(store, cost=600.0, daily=1000))
    clock.past(b)
    assert store.reserve(lop(store, cost=300.0, daily=1000)).admitted
    complete(store, a.parts()[1], prompt=1, output=0)  # 599 back, but to yesterday: today keeps its 300
    assert used(store, clock) == 300.0


def test_request_rate_admits_its_burst_then_throttles_with_limit_rps(store):
    clock = Clock(store)
    noon(clock)
    got = [store.reserve(lop(store, cost=1.0, rps=(0.5, 3.0))).raw for _ in range(4)]
    assert [g[0] for g in got] == ["A", "A", "A", "T"]
    assert got[3] == "T|QUOTA_EXCEEDED|2|rps"  # one request back at 0.5 rps: 2 s
    assert 0.0 <= store.level(f"{store.prefix}rq:s1") < 0.5


def test_replays_are_idempotent_and_charge_once(store):
    clock = Clock(store)
    noon(clock)
    first = store.reserve(lop(store, cost=400.0, daily=1000, rps=(0.0, 5.0), req="same"))
    again = store.reserve(lop(store, cost=400.0, daily=1000, rps=(0.0, 5.0), req="same"))
    assert (again.raw, again.replay) == (first.raw, True)
    assert used(store, clock) == 400.0
    assert store.level(f"{store.prefix}rq:s1") == 4.0
    s1 = complete(store, first.parts()[1], prompt=100, output=0)
    s2 = complete(store, first.parts()[1], prompt=100, output=0)
    assert (s1.replay, s2.replay) == (False, True)
    assert used(store, clock) == 100.0
    # A throttle replays too, with its limit.
    for _ in range(4):
        store.reserve(lop(store, cost=1.0, rps=(0.0, 5.0)))
    t1 = store.reserve(lop(store, cost=1.0, rps=(0.0, 5.0), req="late"))
    t2 = store.reserve(lop(store, cost=1.0, rps=(0.0, 5.0), req="late"))
    assert t1.raw == t2.raw == "T|QUOTA_EXCEEDED|3600|rps"


def test_a_spent_budget_refuses_even_with_room_everywhere_else(store):
    clock = Clock(store)
    noon(clock)
    assert store.reserve(lop(store, cost=100.0, daily=100)).admitted
    # Own bucket, pool and request rate all have room: the budget alone decides.
    t = store.reserve(lop(store, cost=1.0, daily=100, rps=(10.0, 10.0))).raw
    assert t.startswith("T|BUDGET_EXHAUSTED|")
    assert store.level(f"{store.prefix}rq:s1") is None  # a throttled request takes nothing from the rate


def test_a_budget_throttle_replays_for_an_hour_at_most_then_is_decided_afresh(store):
    clock = Clock(store)
    noon(clock)
    assert store.reserve(lop(store, cost=100.0, daily=100)).admitted
    t = store.reserve(lop(store, cost=1.0, daily=100, req="again"))
    assert int(t.raw.split("|")[2]) > 3600  # the advice: midnight, 12 h away
    if clock.redis:
        ttl = store.client.ttl(store.record_key("again"))
        assert 3590 <= ttl <= 3600  # the record of a refused request is kept an hour, not until midnight
    else:
        clock.at(clock.now() + 3601)
        assert not store.reserve(lop(store, cost=1.0, daily=200, req="again")).replay  # decided afresh


def test_borrowing_does_not_bypass_a_budget(store):
    clock = Clock(store)
    noon(clock)
    kw = {"cls": "best_effort", "own": (0.0, 50.0), "borrow": (0.0, 10_000.0), "daily": 300}
    assert store.reserve(lop(store, cost=200.0, **kw)).parts()[3] == "borrowed"  # the pool has room to lend
    t = store.reserve(lop(store, cost=200.0, **kw)).raw  # 400 > 300: the budget refuses, lending or not
    assert t.startswith("T|BUDGET_EXHAUSTED|")
    assert store.level(f"{store.prefix}bb:s1") == 9800.0


def test_a_store_that_forgot_the_reservation_charges_the_actual_use_to_its_period(store):
    clock = Clock(store)
    noon(clock)
    o = lop(store, cost=600.0, daily=1000)
    a = store.reserve(o)
    made_at = float(a.parts()[4]) - o.scope.ttl_s  # the store's clock at the reserve
    store.clear()  # a restart without its data: the record and the period's use are gone
    s = o.scope
    lost = Lost(s.own, s.pool, s.w_out, s.w_cached, s.max_output, 600.0, float(a.parts()[4]), "A|x", s.limits, made_at)
    where = Where("", s.inflight_key, s.own.key, s.pool.key, s.limits)
    # actual = (100 − 20) + 0.5 × 20 + 4 × 50 = 290 wt, charged in full (the reserve's debit was lost)
    done = store.complete(CompleteOp(a.parts()[1], 100, 20, 50, "ok", 60, lost=lost, where=where))
    assert done.lost and done.result["actual_wt"] == 290.0
    assert used(store, clock) == 290.0
    assert store.reserve(lop(store, cost=800.0, daily=1000)).raw.startswith("T|BUDGET_EXHAUSTED|")
    assert store.reserve(lop(store, cost=700.0, daily=1000)).admitted
