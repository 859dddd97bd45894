"""Spillover (issue 36.1, docs/spillover.md) on both backends, through the serving path's own code
(admission.core.reserve / settle.complete with a hand-built snapshot, the signed ids, the two store calls).

acme's reserved scope lives in pool-a (id 1) and spills to pool-b (id 2). Buckets are deep
(DEPTH_S = 10^6 s) and slow, so a level moves by at most a few thousandths of a weighted token while a
test runs on Redis' own clock: counts are exact, levels exact to 0.01 wt. Every request costs 100 wt
(100 prompt tokens, no output). On a Redis Cluster (.ci/run pass (c)) the two pools' keys sit in two
slots: the hand-off and the spill are two script calls, one per pool's hash tag.
"""

from __future__ import annotations

import hashlib
import threading
import uuid

import pytest

from admission import core, keys, settle
from admission.backends import memory as memory_backend
from admission.backends.base import SPILLED, Bucket, ReserveOp, Scope, Spill, SpillOp
from admission.idcodec import Claims, derive_record_key, derive_signing_key, sign, verify
from admission.serving_types import CompleteRequest, ReserveRequest
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot, SpillSpec

DEPTH_S = 1e6
RID_KEY = derive_record_key("spillover tests")
SIGN_KEY = derive_signing_key("spillover tests")
SCOPE = ("acme", "", "m", "r", "reserved")


def pool(pid, slug, depth, margin=0.0, degraded=False):
    return PoolParams(pid, slug, depth / DEPTH_S, depth, margin, degraded, 0.0, None)


def world(own=300.0, spill=500.0, b_depth=2000.0, b_margin=1000.0, allow=True, b_degraded=False):
    """acme reserved in pool-a: an own bucket of `own` wt, a spill budget of `spill` wt into pool-b
    (`b_depth` deep, `b_margin` kept for its lenders)."""
    rate = lambda depth: depth / DEPTH_S  # noqa: E731 - a bucket's rate from its depth
    sp = ScopeParams(":".join(SCOPE), str(uuid.UUID(int=1)), "reserved", rate(own), 0.0, 8000, 2000, 0, 10**6, 2000,
                     200, 4.0, 0.0, 1, spillover=SpillSpec(2, rate(spill), allow, str(uuid.UUID(int=2))))  # fmt: skip
    pools = {1: pool(1, "pool-a", 10_000.0), 2: pool(2, "pool-b", b_depth, b_margin, b_degraded)}
    return Snapshot({SCOPE: sp}, pools, frozenset({("m", "r")}), float("inf"), 1)


def plan_for(snap, sp, p, prefix, who):
    return core.build_plan(sp, p, prefix, who, depth_s=DEPTH_S, ttl_s=600.0, idem_ttl_s=900,
                           target=core.spill_target(snap, sp))  # fmt: skip


class Gateway:
    """The serving path against `store`, its events kept."""

    def __init__(self, store, snap):
        self.store, self.snap, self.events = store, snap, []

    def reserve(self, rid=None, overflow=None):
        req = ReserveRequest(rid or uuid.uuid4().hex, "acme", "", "m", "r", "reserved", 100, 0, 0, overflow)
        return core.reserve(req, self.snap, self.store, sign=lambda c: sign(c, SIGN_KEY), rid_key=RID_KEY,
                            plan_for=plan_for, emit=self.events.append)  # fmt: skip

    def complete(self, reservation_id, prompt=100, output=0):
        req = CompleteRequest(reservation_id, prompt, 0, output, "ok", None, None)
        return settle.complete(req, verify(reservation_id, [SIGN_KEY]), self.snap, self.store, rid_key=RID_KEY,
                             plan_for=plan_for, emit=self.events.append, idem_ttl_s=900)  # fmt: skip

    def scope(self):
        return plan_for(
            self.snap, self.snap.scopes[SCOPE], self.snap.pools[1], self.store.prefix, ("acme", "m", "r", "reserved")
        ).scope

    def level(self, b: Bucket) -> float:
        got = self.store.level(b.key)
        return b.depth if got is None else got


def levels(gw):
    s = gw.scope()
    return {k: round(gw.level(b), 2) for k, b in (("own", s.own), ("pool_a", s.pool), ("spill", s.spill.bucket),
                                                  ("pool_b", s.spill.pool))}  # fmt: skip


def test_spillover_admits_exactly_when_the_own_bucket_is_empty_and_the_target_has_room_within_budget(store):
    gw = Gateway(store, world())
    got = [gw.reserve() for _ in range(10)]
    bodies = [d.body for d in got]
    # 3 on the own bucket (300 wt), then 5 spilled (the 500 wt budget; pool-b keeps 1,000 of 2,000 above its
    # margin, room for 10), then the own throttle: QUOTA_EXCEEDED with the own bucket's wait.
    assert [b.get("source") for b in bodies] == ["entitlement"] * 3 + ["spillover"] * 5 + [None] * 2
    assert [b.get("served_from") for b in bodies] == [None] * 3 + ["pool-b"] * 5 + [None] * 2
    assert bodies[8] == {"decision": "throttle", "reason": "QUOTA_EXCEEDED", "responsible": "tenant",
                         "retry_after_s": 3600, "limit": "rate"}  # fmt: skip
    assert levels(gw) == {"own": 0.0, "pool_a": 9700.0, "spill": 0.0, "pool_b": 1500.0}
    # The spilled ids name the target pool and the source: their complete settles there.
    claims = verify(bodies[3]["reservation_id"], [SIGN_KEY])
    assert (claims.pool_id, claims.source, claims.scope) == (2, "spillover", SCOPE)
    # Events count spilled traffic apart: source_kind "spillover" and where it was served.
    admits = [e for e in gw.events if e["decision"] == "admit"]
    assert [e["source_kind"] for e in admits] == ["entitlement"] * 3 + ["spillover"] * 5
    assert [e.get("served_from") for e in admits] == [None] * 3 + ["pool-b"] * 5
    assert [e["reason"] for e in gw.events if e["decision"] == "throttle"] == ["QUOTA_EXCEEDED"] * 2


def test_the_target_pools_reclaim_margin_bounds_spillover_whatever_the_budget(store):
    # A budget of 5,000 wt, but pool-b keeps 1,500 of its 2,000 for its lenders: 5 spills, not 50.
    gw = Gateway(store, world(own=0.0, spill=5000.0, b_margin=1500.0))
    got = [gw.reserve().body.get("source") for _ in range(8)]
    assert got == ["spillover"] * 5 + [None] * 3
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 4500.0, "pool_b": 1500.0}


def test_overflow_deny_never_spills_and_allow_overrides_a_deny_default(store):
    gw = Gateway(store, world(own=100.0))
    assert gw.reserve(overflow="deny").body["source"] == "entitlement"
    denied = [gw.reserve(overflow="deny").body for _ in range(3)]
    assert [d["reason"] for d in denied] == ["QUOTA_EXCEEDED"] * 3
    assert levels(gw) == {"own": 0.0, "pool_a": 9900.0, "spill": 500.0, "pool_b": 2000.0}
    # An entitlement whose default is deny spills only when the request says "allow".
    gw2 = Gateway(store, world(own=0.0, allow=False))
    assert gw2.reserve().body["reason"] == "QUOTA_EXCEEDED"
    assert gw2.reserve(overflow="allow").body["source"] == "spillover"
    assert gw2.reserve(overflow="allow").body["served_from"] == "pool-b"


def test_a_degraded_target_takes_no_spillover(store):
    gw = Gateway(store, world(own=0.0, b_degraded=True))
    assert gw.reserve().body["reason"] == "QUOTA_EXCEEDED"
    assert levels(gw)["spill"] == 500.0


def test_a_crash_between_the_two_calls_never_double_charges_and_the_retry_gets_one_answer(store):
    gw = Gateway(store, world(own=0.0))
    # The first call alone (the process died before the second): the hand-off marker, nothing charged.
    s = gw.scope()
    rid = core.record_name(RID_KEY, "acme", "req-1")
    first = store.reserve(ReserveOp(s, rid, 100.0, '{"request_id":"req-1"}', 0.0, None, True, True))
    assert first.raw == "S|QUOTA_EXCEEDED|3600" and first.handoff
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 500.0, "pool_b": 2000.0}
    # The retry of the same request: the marker sends it to the spill, which decides once.
    retry = gw.reserve("req-1")
    assert (retry.body["source"], retry.body["served_from"]) == ("spillover", "pool-b")
    again = [gw.reserve("req-1") for _ in range(3)]
    assert {a.body["reservation_id"] for a in again} == {retry.body["reservation_id"]}
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 400.0, "pool_b": 1900.0}
    assert store.inflight(s.spill.inflight_key) == 1
    assert [e["decision"] for e in gw.events] == ["admit"]  # counted once
    # Replayed after its complete: the same answer, settled, never served again nor counted.
    assert gw.complete(retry.body["reservation_id"])[0] == 200
    assert gw.reserve("req-1").body == {**retry.body, "settled": True}
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 400.0, "pool_b": 1900.0}


def test_a_spilled_request_stays_spilled_when_its_own_bucket_refills(store):
    # The second call's answer was lost (the gateway died after it): the retry comes back when the own
    # bucket has room again. It still gets the spilled answer, and the own bucket is not charged.
    snap = world(own=100.0)
    gw = Gateway(store, snap)
    assert gw.reserve().body["source"] == "entitlement"
    spilled = gw.reserve("req-2").body
    assert spilled["source"] == "spillover"
    refill(store, gw.scope().own)
    assert gw.level(gw.scope().own) == 100.0
    assert gw.reserve("req-2").body["reservation_id"] == spilled["reservation_id"]
    assert gw.level(gw.scope().own) == 100.0
    assert round(gw.level(gw.scope().spill.bucket), 2) == 400.0


def test_spill_refused_then_retried_is_answered_from_the_spill_path_once(store):
    # The spill could not take it (budget spent): the own throttle is the answer, replayed as such.
    gw = Gateway(store, world(own=0.0, spill=100.0))
    assert gw.reserve().body["source"] == "spillover"
    refused = gw.reserve("req-3").body
    assert refused["reason"] == "QUOTA_EXCEEDED"
    assert gw.reserve("req-3").body == refused
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 0.0, "pool_b": 1900.0}


@pytest.mark.parametrize(("output", "spill", "pool_b"), [(0, 450.0, 1950.0), (50, 250.0, 1750.0)])
def test_complete_settles_a_spilled_reservation_against_the_spill_budget_and_the_target_pool(
    store, output, spill, pool_b
):
    gw = Gateway(store, world(own=0.0))
    body = gw.reserve().body
    # Reserved at 100 wt; settled at 50 (a refund of 50) or 50 + 4 × 50 = 250 (an overrun of 150).
    code, result = gw.complete(body["reservation_id"], prompt=50, output=output)
    assert code == 200
    assert (result["actual_wt"], result["refunded_wt"]) == (50.0 + 4 * output, 50.0 - 4 * output)
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": spill, "pool_b": pool_b}
    assert store.inflight(gw.scope().spill.inflight_key) == 0
    done = [e for e in gw.events if e["decision"] == "complete"]
    assert [(e["source_kind"], e["served_from"], e["actual_wt"]) for e in done] == [
        ("spillover", "pool-b", 50.0 + 4 * output)
    ]


def test_a_spilled_reservation_the_store_forgot_settles_from_its_id_against_the_target(store):
    gw = Gateway(store, world(own=0.0))
    body = gw.reserve().body
    store.clear()  # a restart without data: the record and its debit are gone
    code, result = gw.complete(body["reservation_id"], prompt=60)
    assert (code, result["actual_wt"]) == (200, 60.0)
    assert levels(gw) == {"own": 0.0, "pool_a": 10_000.0, "spill": 440.0, "pool_b": 1940.0}


def refill(store, own: Bucket):
    """The own bucket full again, as time would leave it: a missing bucket is a full one (Redis runs on
    its own clock, which a test cannot move, so both stores are refilled alike)."""
    if hasattr(store, "client"):
        store.client.delete(own.key)
    else:
        with store._lock:
            store._s.buckets.pop(own.key, None)


# ---- lenders in the target are never refused because of spilled traffic (threads) ------------------


def _race(store, *, spillers=4, n_lender=150, n_spill=100):
    """A shared lender of pool-b admits on its own bucket while spillers from pool-a drain pool-b, from
    threads at once. → (the lender's refusals, spilled admits, pool-b's bucket)."""
    tt, st = keys.tag(store.prefix, 2), keys.tag(store.prefix, 1)
    pool_b = Bucket(keys.pool(tt), 0.0, 20_000.0)
    spill = Spill(tt, 2, "pool-b", Bucket(keys.spill(tt, "sp"), 0.0, 10**9), pool_b, 4000.0, False,
                  keys.spill_inflight(tt, "sp"))  # fmt: skip
    base = {"max_concurrency": 10**6, "borrow": None, "degraded": False, "reserved_floor": 0.0, "ttl_s": 600.0,
            "idem_ttl_s": 60, "w_out": 4.0, "w_cached": 0.0}  # fmt: skip
    lender = Scope(inflight_key=keys.inflight(tt, "lender"), traffic_class="shared", margin=4000.0, tag=tt,
                   own=Bucket(keys.own(tt, "lender"), 0.0, 10**6), pool=pool_b, **base)  # fmt: skip
    spiller = Scope(inflight_key=keys.inflight(st, "sp"), traffic_class="reserved", margin=0.0, tag=st,
                    own=Bucket(keys.own(st, "sp"), 0.0, 0.0), pool=Bucket(keys.pool(st), 0.0, 10**6),
                    spill=spill, **base)  # fmt: skip
    refused, spilled = [], [0]
    lock = threading.Lock()
    start = threading.Barrier(spillers + 1)
    going = threading.Event()

    def lend():
        start.wait()
        going.wait(timeout=30)  # joins once spillers have some of the pool: both then run at once
        for _ in range(n_lender):
            got = store.reserve(ReserveOp(lender, uuid.uuid4().hex, 100.0, "{}"))
            if not got.admitted:
                refused.append(got.raw)

    def spill_some():
        start.wait()
        for _ in range(n_spill):
            rid = uuid.uuid4().hex
            got = store.reserve(ReserveOp(spiller, rid, 100.0, "{}", 0.0, None, False, True))
            assert got.handoff, got.raw
            got = store.spill(SpillOp(spill, rid + SPILLED, 100.0, "{}", "T|" + got.raw[2:], 600.0, 60, 4.0, 0.0,
                                      2**53))  # fmt: skip
            if got.admitted:
                with lock:
                    spilled[0] += 1
                    if spilled[0] >= 40:
                        going.set()

    threads = [threading.Thread(target=lend)] + [threading.Thread(target=spill_some) for _ in range(spillers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return refused, spilled[0], store.level(pool_b.key)


def test_a_lender_in_the_target_is_never_refused_and_spillover_takes_only_room_above_the_margin(store):
    refused, spilled, pool_b = _race(store)
    print(f"with the guard: lender refused {len(refused)} of 150, spilled admits {spilled}, pool-b {pool_b}")
    assert refused == []
    # Spilled traffic stopped at the margin lenders keep: at most (20,000 − 4,000) / 100 of the 400 asked.
    assert 40 <= spilled <= 160
    assert pool_b == 20_000.0 - 150 * 100.0 - spilled * 100.0


SPILL_GUARD = "room_above_margin(pool_l, c, tonumber(ARGV[9]))"


def test_negative_control_without_the_margin_guard_spillover_takes_the_lenders_room(store, monkeypatch):
    """The race above with the spill's reclaim-margin guard taken out (memory: spill_decide mutated;
    Redis: spill.lua mutated the same way): spilled traffic takes pool-b far below the margin."""
    if hasattr(store, "client"):
        script = store._spill
        assert SPILL_GUARD in script.source.decode()
        script.source = script.source.decode().replace(SPILL_GUARD, "true").encode()
        script.sha = hashlib.sha1(script.source).hexdigest().encode()  # noqa: S324
    else:
        unguarded = lambda op, spill_l, pool_l, lend_l: spill_l >= op.cost  # noqa: E731
        monkeypatch.setattr(memory_backend, "spill_decide", unguarded)
    refused, spilled, pool_b = _race(store)
    print(f"without the guard: lender refused {len(refused)} of 150, spilled admits {spilled}, pool-b {pool_b}")
    assert spilled == 400  # every spill admitted: the lenders' room taken
    assert pool_b == -20_000.0  # and the pool in debt to its bound


def test_the_spilled_id_round_trips_its_target_pool():
    c = Claims("acme", "r", SCOPE, 2, "100.0", "1800000000.5", "spillover")
    assert verify(sign(c, SIGN_KEY), [SIGN_KEY]) == c
    assert c._replace(source="entitlement") != c  # Claims is a NamedTuple (idcodec)
