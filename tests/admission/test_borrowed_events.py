"""A borrowed admission's complete and expiry events say `source_kind: borrowed` (issue 36: the statement
and the live views count borrowed traffic apart; a statement read "2,061 borrowed admitted, 0 settled"
because the store's record kept the reserve's meta, written before the store chose the bucket). Both
backends, through the serving path's own code (admission.core and settle with a hand-built snapshot, as
test_spillover_contract.py does): the record the store writes, the id the store forgot (claims_meta),
and a reservation swept past its TTL (memory backend, its own clock).

acme's best_effort scope in pool 1: an own bucket of 100 wt (one 100-wt request), a borrow bucket of
1,000 wt, a pool of 10,000 wt with no margin.
"""

from __future__ import annotations

import uuid

from admission import core, settle
from admission.backends import memory as memory_backend
from admission.idcodec import verify
from admission.serving_types import CompleteRequest, ReserveRequest
from admission.snapshot_types import ScopeParams, Snapshot
from tests.admission.test_spillover_contract import DEPTH_S, RID_KEY, SIGN_KEY, Gateway, pool

SCOPE = ("acme", "", "m", "r", "best_effort")


def world(ttl_s: float = 600.0) -> tuple[Snapshot, object]:
    rate = lambda depth: depth / DEPTH_S  # noqa: E731 - a bucket's rate from its depth
    sp = ScopeParams(":".join(SCOPE), str(uuid.UUID(int=7)), "best_effort", rate(100.0), rate(1000.0), 8000, 2000, 0,
                     10**6, 2000, 200, 4.0, 0.0, 1)  # fmt: skip
    snap = Snapshot({SCOPE: sp}, {1: pool(1, "pool-a", 10_000.0)}, frozenset({("m", "r")}), float("inf"), 1)

    def plan_for(snap, sp, p, prefix, who):
        return core.build_plan(sp, p, prefix, who, depth_s=DEPTH_S, ttl_s=ttl_s, idem_ttl_s=900)

    return snap, plan_for


class BestEffort(Gateway):
    def __init__(self, store, ttl_s: float = 600.0):
        snap, self.plan_for = world(ttl_s)
        super().__init__(store, snap)

    def reserve(self, rid=None, overflow=None):
        req = ReserveRequest(rid or uuid.uuid4().hex, "acme", "", "m", "r", "best_effort", 100, 0, 0, overflow)
        return core.reserve(req, self.snap, self.store, sign=lambda c: core_sign(c), rid_key=RID_KEY,
                            plan_for=self.plan_for, emit=self.events.append)  # fmt: skip

    def complete(self, reservation_id, prompt=100, output=0):
        req = CompleteRequest(reservation_id, prompt, 0, output, "ok", None, None)
        return settle.complete(req, verify(reservation_id, [SIGN_KEY]), self.snap, self.store, rid_key=RID_KEY,
                             plan_for=self.plan_for, emit=self.events.append, idem_ttl_s=900)  # fmt: skip


def core_sign(c):
    from admission.idcodec import sign

    return sign(c, SIGN_KEY)


def _completes(gw):
    return [(e["status"], e.get("source_kind"), e["actual_wt"]) for e in gw.events if e["decision"] == "complete"]


def test_a_borrowed_admission_completes_as_borrowed(store):
    gw = BestEffort(store)
    ids = [gw.reserve().body for _ in range(3)]
    assert [b["source"] for b in ids] == ["entitlement", "borrowed", "borrowed"]
    for b, prompt in zip(ids, (100, 60, 140), strict=True):
        assert gw.complete(b["reservation_id"], prompt=prompt)[0] == 200
    assert _completes(gw) == [("ok", None, 100.0), ("ok", "borrowed", 60.0), ("ok", "borrowed", 140.0)]


def test_a_borrowed_reservation_the_store_forgot_completes_as_borrowed(store):
    gw = BestEffort(store)
    gw.reserve()  # the own bucket's one request
    b = gw.reserve().body
    assert b["source"] == "borrowed"
    store.clear()  # a restart without data: the complete settles from the signed id (settle.claims_meta)
    assert gw.complete(b["reservation_id"], prompt=80)[0] == 200
    assert _completes(gw) == [("ok", "borrowed", 80.0)]


def test_a_borrowed_reservation_swept_past_its_ttl_expires_as_borrowed():
    now = [1000.0]
    gw = BestEffort(memory_backend.MemoryBackend(clock=lambda: now[0]), ttl_s=5.0)
    gw.reserve()
    assert gw.reserve().body["source"] == "borrowed"
    now[0] += 6.0
    assert settle.sweep(gw.store, gw.events.append) == 2
    assert sorted(_completes(gw), key=lambda e: e[1] or "") == [
        ("expired", None, 100.0),
        ("expired", "borrowed", 100.0),
    ]
