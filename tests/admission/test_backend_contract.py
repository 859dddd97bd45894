"""One contract suite, run on both backends: the Redis scripts and the in-process store.

Bucket rates are 0 unless a test is about refill, so levels are exact whatever the clock does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
import uuid

import pytest

from admission import keys
from admission.backends import memory as memory_backend
from admission.backends.base import NO_OUTPUT_CAP, Bucket, CompleteOp, Lends, ReserveOp, Scope, Share, Where


def op(
    cls="reserved",
    *,
    cost=100.0,
    own=(0.0, 1000.0),
    pool=(0.0, 10_000.0),
    borrow=None,
    maxc=100,
    margin=0.0,
    degraded=False,
    floor=0.0,
    ttl=600.0,
    req=None,
    scope="s1",
    max_output=NO_OUTPUT_CAP,
    share=None,
) -> ReserveOp:
    return ReserveOp(
        scope=Scope(
            inflight_key=f"if:{scope}",
            max_concurrency=maxc,
            traffic_class=cls,
            own=Bucket(f"b:{scope}", *own),
            pool=Bucket("p:1", *pool),
            borrow=Bucket(f"bb:{scope}", *borrow) if borrow else None,
            margin=margin,
            degraded=degraded,
            reserved_floor=floor,
            ttl_s=ttl,
            idem_ttl_s=60,
            w_out=4.0,
            w_cached=0.5,
            max_output=max_output,
            share=share,
        ),
        reservation_id=req or uuid.uuid4().hex,  # the same request → the same id (services.reservation_id)
        cost=cost,
        meta=json.dumps({"scope": scope}),
    )


def _tag(b) -> str:
    """Redis tests isolate their keys under the backend's prefix, all under one hash tag (so the
    suite runs on a Redis Cluster too: every key of a script in one slot)."""
    return keys.tag(b.prefix, "contract")


def _key(b, k):
    return _tag(b) + k if hasattr(b, "client") else k


def prefixed(b, o: ReserveOp) -> ReserveOp:
    if not hasattr(b, "client"):
        return o
    p, s = _tag(b), o.scope
    bor = Bucket(p + s.borrow.key, s.borrow.rate, s.borrow.depth) if s.borrow else None
    scope = dataclasses.replace(
        s,
        inflight_key=p + s.inflight_key,
        own=Bucket(p + s.own.key, s.own.rate, s.own.depth),
        pool=Bucket(p + s.pool.key, s.pool.rate, s.pool.depth),
        borrow=bor,
        tag=p,
    )
    if s.share is not None:
        ln = s.share.lend
        lend = Bucket(p + ln.key, ln.rate, ln.depth) if ln else None
        scope = dataclasses.replace(scope, share=dataclasses.replace(s.share, lend=lend, fair=p + s.share.fair))
    if s.lends is not None:
        kb = s.lends.keep
        keep = Bucket(p + kb.key, kb.rate, kb.depth) if kb else None
        ln = Bucket(p + s.lends.lend.key, s.lends.lend.rate, s.lends.lend.depth)
        scope = dataclasses.replace(scope, lends=Lends(ln, keep))
    return ReserveOp(scope, o.reservation_id, o.cost, o.meta)


def reserve(b, o):
    return b.reserve(prefixed(b, o))


def complete(b, rid, prompt=10, cached=0, output=10, status="ok"):
    # Built by hand, as a gateway's id would not be: only the pool's tag; the store names the rest.
    where = Where(_tag(b)) if hasattr(b, "client") else None
    return b.complete(CompleteOp(rid, prompt, cached, output, status, 60, where=where))


def test_own_bucket_admits_until_empty_then_quota_exceeded(store):
    t0 = time.monotonic()
    answers = [reserve(store, op(cost=300.0, own=(10.0, 1000.0))).raw for _ in range(4)]
    elapsed = time.monotonic() - t0
    assert [a.split("|")[0] for a in answers] == ["A", "A", "A", "T"]
    assert answers[0].split("|")[3] == "entitlement"
    # 100 wt left, 300 needed at 10 wt/s: 20 s.
    assert answers[3] == "T|QUOTA_EXCEEDED|20"
    # It refills at 10 wt/s meanwhile: at most what the calls' own time let in (scaled, not a wall-clock limit).
    assert 100.0 <= store.level(_key(store, "b:s1")) <= 100.0 + 10.0 * elapsed + 1e-9
    assert store.level(_key(store, "p:1")) == 9100.0


def test_same_request_id_gives_the_same_answer_and_debits_once(store):
    first = reserve(store, op(req="same"))
    again = reserve(store, op(req="same"))
    assert again.raw == first.raw
    assert (first.replay, again.replay) == (False, True)
    assert store.level(_key(store, "b:s1")) == 900.0
    assert store.inflight(_key(store, "if:s1")) == 1


def test_concurrency_cap_and_complete_frees_the_slot(store):
    a = reserve(store, op(maxc=2))
    reserve(store, op(maxc=2))
    assert reserve(store, op(maxc=2)).raw == "T|CONCURRENCY_LIMIT|1"
    complete(store, a.parts()[1])
    assert reserve(store, op(maxc=2)).admitted
    assert store.inflight(_key(store, "if:s1")) == 2


def test_an_admit_reports_the_scopes_reservations_in_flight_after_it(store):
    # the statement's concurrency peak (issue 17) is the largest of these: exact, the store's own count
    a = reserve(store, op(maxc=3))
    b = reserve(store, op(maxc=3))
    assert (a.in_flight, b.in_flight) == (1, 2)
    complete(store, a.parts()[1])
    assert reserve(store, op(maxc=3)).in_flight == 2
    assert reserve(store, op(maxc=3)).in_flight == 3
    assert not reserve(store, op(maxc=3)).admitted  # at the cap: a throttle carries no count
    again = reserve(store, op(req="same", maxc=5))
    assert again.in_flight == 4 and reserve(store, op(req="same", maxc=5)).in_flight == 0  # a replay: none


def test_complete_refunds_unused_and_charges_overruns_into_debt(store):
    a = reserve(store, op(cost=600.0))
    b = reserve(store, op(cost=400.0))
    assert store.level(_key(store, "b:s1")) == 0.0
    # actual = (100 − 20) + 0.5 × 20 + 4 × 50 = 290 → 310 back
    s = complete(store, a.parts()[1], prompt=100, cached=20, output=50)
    assert s.result == {
        "reservation_id": a.parts()[1],
        "status": "ok",
        "reserved_wt": 600.0,
        "actual_wt": 290.0,
        "refunded_wt": 310.0,
    }
    assert store.level(_key(store, "b:s1")) == 310.0
    # actual = 10 + 4 × 250 = 1010 → 610 charged: the bucket goes into debt
    complete(store, b.parts()[1], prompt=10, output=250)
    assert store.level(_key(store, "b:s1")) == -300.0
    assert store.level(_key(store, "p:1")) == 10_000.0 - 290.0 - 1010.0
    assert reserve(store, op(cost=1.0)).raw.startswith("T|QUOTA_EXCEEDED|")


def test_complete_is_idempotent(store):
    a = reserve(store, op(cost=600.0))
    first = complete(store, a.parts()[1], prompt=10, output=10)
    again = complete(store, a.parts()[1], prompt=999, output=999)
    assert again.result == first.result
    assert (first.replay, again.replay) == (False, True)
    assert store.level(_key(store, "b:s1")) == 1000.0 - 600.0 + 550.0
    assert store.inflight(_key(store, "if:s1")) == 0


def test_unknown_reservation_is_none(store):
    assert complete(store, "nope") is None


def test_ttl_settles_abandoned_reservations_lazily_at_full_estimate(store):
    a = reserve(store, op(cost=200.0, maxc=1, ttl=0.05))
    time.sleep(0.1)
    b = reserve(store, op(cost=100.0, maxc=1))
    assert b.admitted
    assert [json.loads(m) for m in b.expired_metas] == [{"scope": "s1"}]
    assert store.level(_key(store, "b:s1")) == 700.0  # the expired one kept its full 200
    late = complete(store, a.parts()[1], prompt=1, output=1)
    assert (late.result["status"], late.result["refunded_wt"], late.replay) == ("expired", 0, True)
    assert store.level(_key(store, "b:s1")) == 700.0


def test_complete_after_ttl_settles_as_expired_once(store):
    a = reserve(store, op(cost=200.0, ttl=0.05))
    time.sleep(0.1)
    s = complete(store, a.parts()[1], prompt=1, output=1)
    assert (s.result["status"], s.result["actual_wt"], s.replay, json.loads(s.meta)) == (
        "expired",
        200.0,
        False,
        {"scope": "s1"},
    )
    assert store.level(_key(store, "b:s1")) == 800.0
    assert store.inflight(_key(store, "if:s1")) == 0


def test_sweep_settles_expired_reservations(store):
    reserve(store, op(ttl=0.05, scope="x"))
    reserve(store, op(ttl=0.05, scope="y"))
    keep = reserve(store, op(ttl=600, scope="y"))
    time.sleep(0.1)
    assert sorted(json.loads(m)["scope"] for m in store.sweep()) == ["x", "y"]
    assert store.sweep() == []
    assert (store.inflight(_key(store, "if:x")), store.inflight(_key(store, "if:y"))) == (0, 1)
    assert complete(store, keep.parts()[1]).result["status"] == "ok"


def test_bucket_refills_at_its_rate(store):
    assert reserve(store, op(cost=1000.0, own=(2000.0, 1000.0))).admitted
    assert reserve(store, op(cost=1000.0, own=(2000.0, 1000.0))).raw == "T|QUOTA_EXCEEDED|1"
    time.sleep(0.6)  # ≥ 1000 wt back at 2000 wt/s
    assert reserve(store, op(cost=1000.0, own=(2000.0, 1000.0))).admitted


def test_shared_borrows_above_the_margin_then_is_reclaimed(store):
    kw = {"cls": "shared", "own": (0.0, 100.0), "borrow": (0.0, 1000.0), "pool": (0.0, 1000.0), "margin": 200.0}
    assert reserve(store, op(cost=100.0, **kw)).parts()[3] == "entitlement"
    got = [reserve(store, op(cost=300.0, **kw)).raw for _ in range(3)]
    assert got[0].split("|")[3] == "borrowed"
    assert got[1].split("|")[3] == "borrowed"  # pool 600 → 300 ≥ margin 200
    assert got[2] == "T|RECLAIMED|5"  # pool 300 − 300 < margin
    assert store.level(_key(store, "bb:s1")) == 400.0


def test_borrowing_limit_used_up_is_quota_exceeded(store):
    kw = {"cls": "shared", "own": (0.0, 0.0), "borrow": (0.0, 250.0), "pool": (0.0, 10_000.0)}
    assert reserve(store, op(cost=200.0, **kw)).parts()[3] == "borrowed"
    assert reserve(store, op(cost=200.0, **kw)).raw == "T|QUOTA_EXCEEDED|3600"


def test_overage_throttle_never_borrows(store):
    assert reserve(store, op("shared", cost=200.0, own=(1.0, 100.0))).raw == "T|QUOTA_EXCEEDED|100"


def test_lender_own_bucket_is_admitted_with_the_pool_in_deficit(store):
    # Borrowers drained the pool to its margin; the lender's own bucket still admits, into pool debt.
    for cls in ("reserved", "shared"):
        a = reserve(store, op(cls, cost=500.0, own=(0.0, 1000.0), pool=(0.0, 300.0), margin=60.0, scope=cls))
        assert a.parts()[3] == "entitlement"
    # 300 − 1000 = −700 would be more than one depth of debt: the pool stops at −300.
    assert store.level(_key(store, "p:1")) == -300.0


def test_best_effort_needs_pool_room_even_within_its_own_bucket(store):
    kw = {"own": (0.0, 1000.0), "pool": (0.0, 500.0), "margin": 100.0}
    assert reserve(store, op("best_effort", cost=400.0, **kw)).admitted
    assert reserve(store, op("best_effort", cost=400.0, **kw)).raw == "T|RECLAIMED|5"


def test_degraded_pool_sheds_best_effort_then_shared_then_reserved(store):
    # Pool depth 1000, margin 200, reserved may take it to −500.
    kw = {"pool": (0.0, 1000.0), "margin": 200.0, "degraded": True, "floor": -500.0, "own": (0.0, 10_000.0)}
    reserve(store, op("reserved", cost=700.0, scope="r", **kw))  # pool 300
    assert reserve(store, op("best_effort", cost=200.0, scope="b", **kw)).raw == "T|PLATFORM_CAPACITY|10"
    assert reserve(store, op("shared", cost=300.0, scope="s", **kw)).admitted  # pool 0
    assert reserve(store, op("shared", cost=1.0, scope="s", **kw)).raw == "T|PLATFORM_CAPACITY|10"
    assert reserve(store, op("reserved", cost=500.0, scope="r", **kw)).admitted  # pool −500
    assert reserve(store, op("reserved", cost=1.0, scope="r", **kw)).raw == "T|PLATFORM_CAPACITY|10"
    assert store.level(_key(store, "p:1")) == -500.0


def test_settled_output_is_capped_at_the_envelope_max_and_the_cap_reported(store):
    a = reserve(store, op(cost=100.0, max_output=50))
    s = complete(store, a.parts()[1], prompt=10, output=10**30)
    # actual = 10 + 4 × 50 (not 4 × 10³⁰): 110 charged over the estimate
    assert s.result == {"reservation_id": a.parts()[1], "status": "ok", "reserved_wt": 100.0, "actual_wt": 210.0,
                        "refunded_wt": -110.0, "output_cap": 50}  # fmt: skip
    assert store.level(_key(store, "b:s1")) == 1000.0 - 210.0
    b = reserve(store, op(cost=100.0, max_output=50))
    assert "output_cap" not in complete(store, b.parts()[1], prompt=10, output=50).result  # at the cap: not capped


def test_debt_is_bounded_at_one_bucket_depth(store):
    a = reserve(store, op(cost=100.0, own=(0.0, 1000.0), pool=(0.0, 10_000.0)))
    complete(store, a.parts()[1], prompt=10**12, output=0)  # no envelope cap on prompts: a huge overrun
    assert store.level(_key(store, "b:s1")) == -1000.0
    assert store.level(_key(store, "p:1")) == -10_000.0
    # Another scope on the same pool: its lender still admits (the pool debt is bounded, not −10¹²).
    assert reserve(store, op(cost=100.0, own=(0.0, 1000.0), pool=(0.0, 10_000.0), scope="s2")).admitted


# ---- lending limits and fair share (issue 36.3) ---------------------------------------------------


def share(member, weight=1.0, lend=None, active_s=10.0):
    """A borrowing scope's Share: `lend` (rate, depth) of the pool's lend bucket, None: unlimited."""
    return Share(Bucket("ln:1", *lend) if lend else None, "fs:1", member, weight, 60.0, active_s)


def borrower(member, weight=1.0, lend=None, cost=100.0, pool=(0.0, 10**9), borrow=(10**6, 10**9), **kw):
    """A best_effort scope with no room of its own: every admission is borrowed."""
    return op("best_effort", cost=cost, own=(0.0, 0.0), borrow=borrow, pool=pool, scope=member,
              maxc=10**6, share=share(member, weight, lend), **kw)  # fmt: skip


def _decision(a):
    """An answer's decision: 'A' and its source for an admit, the whole throttle answer otherwise."""
    p = a.parts()
    return ("A", p[3]) if a.admitted else a.raw


class Clock:
    """The in-process store's injectable clock (MemoryBackend.clock); Redis keeps its own: there a
    step lets real time pass (the scripts read Redis' TIME), and the test measures it."""

    def __init__(self, store):
        self.store, self.redis = store, hasattr(store, "client")
        self.t = 1_800_000_000.0
        if not self.redis:
            store.clock = lambda: self.t
        self.start = time.monotonic()

    def step(self, dt):
        if not self.redis:
            self.t += dt

    def elapsed(self):
        return time.monotonic() - self.start if self.redis else self.t - 1_800_000_000.0


def test_borrowed_admissions_never_pass_the_lending_limit(store):
    # The lenders lend at most 500 wt/s (60 s depth: 30,000 wt) although the pool has far more room:
    # a borrower asking 2,000 wt/s for a simulated minute gets the limit's worth, never more.
    clock = Clock(store)
    lend = (500.0, 30_000.0)
    taken, over = 0.0, []
    steps = 1200 if not clock.redis else 400
    for i in range(steps):
        got = reserve(store, borrower("be", lend=lend))
        if got.admitted:
            assert got.parts()[3] == "borrowed"
            taken += 100.0
        else:
            assert got.raw.startswith("T|QUOTA_EXCEEDED|") and got.raw.endswith("|lending"), got.raw
        bound = lend[1] + lend[0] * clock.elapsed() + 1e-6
        if taken > bound:
            over.append((i, taken, bound))
        clock.step(0.05)
    assert not over
    # ...and the limit is what binds: it was lent up to it (within one request, plus refill).
    assert taken >= lend[1] + lend[0] * (clock.elapsed() if not clock.redis else 0.0) - 100.0
    assert store.level(_key(store, "ln:1")) < 100.0 + lend[0] * (clock.elapsed() if clock.redis else 0.0) + 1e-6


def test_no_lending_limit_lends_all_idle_room(store):
    # Without a lend bucket only the pool bucket (above the margin) and the borrowing limit hold borrowers.
    kw = {"pool": (0.0, 1000.0), "margin": 200.0, "borrow": (0.0, 10**6)}
    got = [reserve(store, borrower("be", **kw)).raw for _ in range(9)]
    assert [g.split("|")[0] for g in got] == ["A"] * 8 + ["T"]
    assert got[8] == "T|RECLAIMED|5"


def test_two_borrowers_share_contended_lendable_room_by_weight(store):
    # Weights 1 and 3 contending for the same lendable room (the lend bucket: 1,000 wt/s, 60 s deep),
    # each asking far more than it (5,000 wt/s); over a simulated minute the weighted tokens admitted
    # split 1:3 within 5 %.
    clock = Clock(store)
    lend = (1000.0, 60_000.0)
    admitted = {"w1": 0.0, "w3": 0.0}
    refused = {"w1": 0, "w3": 0}
    steps = 3000 if not clock.redis else 1500
    first = None  # the lend bucket's (level, time) right after its first charge, by the store's clock
    calls = []  # (member, the store's clock at the call: the answer's last quota field, the answer's decision)
    for i in range(steps):
        order = ("w1", "w3") if i % 2 == 0 else ("w3", "w1")
        for m in order:
            got = reserve(store, borrower(m, weight=1.0 if m == "w1" else 3.0, lend=lend))
            calls.append((m, float(got.quota.rsplit("|", 1)[1]), _decision(got)))
            if got.admitted:
                admitted[m] += 100.0
                if first is None:
                    first = store.bucket_state(_key(store, "ln:1"))
            else:
                refused[m] += 1
                assert got.raw == "T|QUOTA_EXCEEDED|1|fair_share" or got.raw.endswith("|lending"), got.raw
        clock.step(0.02)
    total = admitted["w1"] + admitted["w3"]
    assert total >= lend[1]  # the room was contended: at least the full bucket went out
    # Every step asks once for each: what was not admitted was refused.
    assert {m: refused[m] + admitted[m] / 100.0 for m in refused} == {"w1": steps, "w3": steps}
    if not clock.redis:  # the simulated clock makes the memory backend's run exact
        assert refused == {"w1": 2693, "w3": 2108}
    else:  # Redis reads its own clock: exact against the in-process twin below; the lighter is held back more
        assert refused["w1"] > refused["w3"]
        # ...and exactly as the in-process twin decides at the same moments: the same calls replayed on a
        # MemoryBackend whose clock reads, at each call, the time Redis answered it with.
        twin, at = memory_backend.MemoryBackend(), [0.0]
        twin.clock = lambda: at[0]
        replayed = []
        for m, t, _ in calls:
            at[0] = t
            got = twin.reserve(borrower(m, weight=1.0 if m == "w1" else 3.0, lend=lend))
            replayed.append((m, t, _decision(got)))
        assert replayed == calls
        # the refusals counted above are exactly the twin's, member by member
        twin_refused = {m: sum(1 for who, _, d in replayed if who == m and d[0] != "A") for m in refused}
        assert refused == twin_refused
    # Exact on both stores: the lend bucket gave out its depth, less what it holds now, plus what it refilled
    # between its first charge and its last (it never filled up again: both borrowers drained it every step).
    assert first == (lend[1] - 100.0, first[1])
    level, at = store.bucket_state(_key(store, "ln:1"))
    assert total == pytest.approx(lend[1] - level + lend[0] * (at - first[1]), abs=1e-6)
    ratio = admitted["w3"] / admitted["w1"]
    print(f"lend bucket, {clock.elapsed():.1f} s: admitted {admitted}, 1:{ratio:.3f}, refused {refused}")
    assert 3 * 0.95 <= ratio <= 3 * 1.05, (admitted, ratio)
    # The store's own account of borrowed tokens in the window agrees (decayed alike on both).
    state = store.fair_state(_key(store, "fs:1"), 60.0)
    assert state["w3"][0] / state["w1"][0] == pytest.approx(3.0, rel=0.05)
    assert (state["w1"][1], state["w3"][1]) == (1.0, 3.0)


def test_a_lone_borrower_takes_all_lendable_room(store):
    # Fair share only binds among waiting borrowers: alone, a borrower of weight 1 gets everything.
    lend = (0.0, 5000.0)
    got = [reserve(store, borrower("solo", weight=1.0, lend=lend)).admitted for _ in range(60)]
    assert sum(got) == 50
    # Another borrower that stopped asking long ago does not hold it back either (only waiting ones count).


def test_fair_share_follows_the_pool_bucket_when_lenders_use_their_room(store):
    # No lending limit: the pool bucket (above its margin) is the contended room; weights still decide.
    clock = Clock(store)
    pool = (2000.0, 20_000.0)
    admitted = {"w1": 0.0, "w3": 0.0}
    steps = 2000 if not clock.redis else 1000
    for i in range(steps):
        for m in ("w1", "w3") if i % 2 == 0 else ("w3", "w1"):
            got = reserve(store, borrower(m, weight=1.0 if m == "w1" else 3.0, pool=pool, margin=2000.0))
            admitted[m] += 100.0 if got.admitted else 0.0
        clock.step(0.02)
    ratio = admitted["w3"] / admitted["w1"]
    print(f"pool bucket, {clock.elapsed():.1f} s: admitted {admitted}, 1:{ratio:.3f}")
    assert 3 * 0.95 <= ratio <= 3 * 1.05, (admitted, ratio)


def _race(store, *, borrowers=4, n_lender=150, n_borrow=300):
    """A shared lender admits on its own bucket while borrowers drain the pool below its margin,
    from threads at once. → the lender's refusals (reason strings) and how many borrowed admits."""
    pool = (0.0, 20_000.0)
    lender_refused, borrowed = [], [0]
    lock = threading.Lock()
    start = threading.Barrier(borrowers + 1)
    going = threading.Event()

    def lender():
        start.wait()
        # The lender joins once borrowers have some of the pool (then both run at once), so the pool
        # surely passes below the margin while the lender is still admitting, whatever the scheduling.
        going.wait(timeout=30)
        for _ in range(n_lender):
            got = reserve(
                store, op("shared", cost=100.0, own=(0.0, 10**6), pool=pool, margin=4000.0, scope="lender", maxc=10**6)
            )
            if not got.admitted:
                lender_refused.append(got.raw)

    def borrow(k):
        start.wait()
        for _ in range(n_borrow):
            got = reserve(store, borrower(f"b{k}", weight=1.0 + k, pool=pool, margin=4000.0))
            if got.admitted:
                with lock:
                    borrowed[0] += 1
                    if borrowed[0] >= 40:
                        going.set()

    threads = [threading.Thread(target=lender)] + [threading.Thread(target=borrow, args=(k,)) for k in range(borrowers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lender_refused, borrowed[0]


def test_a_lender_is_never_refused_because_of_borrowed_traffic(store):
    refused, borrowed = _race(store)
    print(f"with the guard: lender refused {len(refused)} of 150, borrowed admits {borrowed}")
    # Borrowers took pool room down to the margin while the lender ran (at most 16,000 of 20,000 wt).
    assert 40 <= borrowed <= 160
    assert refused == []
    # The pool ended below the margin borrowers must leave: the lender kept admitting past it.
    assert store.level(_key(store, "p:1")) == 20_000.0 - 150 * 100.0 - borrowed * 100.0 < 4000.0


def _unguarded_decide(o, own_l, pool_l, borrow_l):
    """decide() with the reclaim guard taken out: a lender's own-bucket admission needs pool room above
    the margin too, as a borrower's does (the mutation the race test must catch)."""
    verdict, what, wait = _DECIDE(o, own_l, pool_l, borrow_l)
    if verdict == "admit" and what == "entitlement" and pool_l - o.cost < o.scope.margin:
        return "throttle", "RECLAIMED", 0.0
    return verdict, what, wait


_DECIDE = memory_backend.decide
GUARD = "elseif own_l >= c then\n  if cls == 'shared' then"


def test_negative_control_the_race_test_fails_without_the_reclaim_guard(store, monkeypatch):
    """The race above with the guard removed (memory: decide() mutated; Redis: reserve.lua mutated the
    same way) refuses the lender RECLAIMED: the race test can see the guard go."""
    if hasattr(store, "client"):
        script = store._reserve
        assert GUARD in script.source.decode()
        mutated = script.source.decode().replace(GUARD, GUARD.replace("'shared' then", "'shared' and pool_ok then"))
        script.source = mutated.encode()
        script.sha = hashlib.sha1(script.source).hexdigest().encode()  # noqa: S324
    else:
        monkeypatch.setattr(memory_backend, "decide", _unguarded_decide)
    refused, borrowed = _race(store)
    print(f"without the guard: lender refused {len(refused)} of 150, borrowed admits {borrowed}")
    assert refused and set(refused) == {"T|RECLAIMED|5"}
