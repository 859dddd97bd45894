"""$ accounts in both stores (issue 51.3, admission.usd): hold, settle, release, expiry at the
estimate, replays, two accounts at once, and 32 concurrent clients that never take an account over."""

from __future__ import annotations

import threading
import time
import uuid

from admission.usd import UsdHold, account_key


def _keys(store, *projects: str) -> tuple[str, ...]:
    t = f"t{uuid.uuid4().hex[:6]}"
    return tuple(account_key(store.prefix, t, p, "2026-12") for p in projects)


def hold(keys, limits, rid, usd, ttl_s=600.0) -> UsdHold:
    return UsdHold(keys, limits, rid, usd, ttl_s)


def test_holds_up_to_the_limit_then_refuses_and_a_settle_below_the_estimate_gives_room_back(store):
    ks = _keys(store, "")
    assert store.usd_hold(hold(ks, (10.0,), "r1", 4.0)).remaining == 6.0
    assert store.usd_hold(hold(ks, (10.0,), "r2", 4.0)).remaining == 2.0
    refused = store.usd_hold(hold(ks, (10.0,), "r3", 4.0))
    assert (refused.admitted, refused.remaining) == (False, 2.0)
    assert store.usd_spent(ks[0]) == (0.0, 8.0)  # a refusal holds nothing
    assert store.usd_settle(ks, "r1", 1.5)  # actual below the estimate: 2.5 back
    assert store.usd_spent(ks[0]) == (1.5, 4.0)
    assert store.usd_hold(hold(ks, (10.0,), "r3", 4.0)).admitted
    assert not store.usd_settle(ks, "r1", 1.5)  # settled already: nothing charged twice
    assert store.usd_spent(ks[0]) == (1.5, 8.0)


def test_a_retried_hold_is_a_replay_and_a_release_charges_nothing(store):
    ks = _keys(store, "")
    assert not store.usd_hold(hold(ks, (5.0,), "r1", 3.0)).replay
    again = store.usd_hold(hold(ks, (5.0,), "r1", 3.0))
    assert (again.admitted, again.replay, again.remaining) == (True, True, 2.0)
    assert store.usd_settle(ks, "r1", 0.0)
    assert store.usd_spent(ks[0]) == (0.0, 0.0)


def test_tenant_and_project_accounts_are_held_together_and_the_tighter_refuses(store):
    tenant, project = _keys(store, "", "web")[0], None
    project = tenant + ":p:web"
    ks = (tenant, project)
    assert store.usd_hold(hold(ks, (100.0, 5.0), "r1", 4.0)).remaining == 1.0
    r = store.usd_hold(hold(ks, (100.0, 5.0), "r2", 4.0))
    assert (r.admitted, r.remaining) == (False, 1.0)
    assert store.usd_spent(tenant) == (0.0, 4.0)  # the tenant's account was not held for the refused one


def test_an_expired_hold_is_charged_at_its_estimate(store):
    ks = _keys(store, "")
    store.usd_hold(hold(ks, (10.0,), "r1", 3.0, ttl_s=0.2))
    if hasattr(store, "client"):
        deadline = time.monotonic() + 30
        while store.usd_hold(hold(ks, (10.0,), "probe", 0.0)) and store.usd_spent(ks[0])[0] < 3.0:
            assert time.monotonic() < deadline, "the hold never lapsed"
            time.sleep(0.05)
    else:
        t = store.clock()
        store.clock = lambda: t + 1.0
        store.usd_hold(hold(ks, (10.0,), "probe", 0.0))
    assert store.usd_spent(ks[0])[0] == 3.0
    assert not store.usd_settle(ks, "r1", 1.0)  # too late: it was charged at its estimate


def test_32_concurrent_clients_never_take_an_account_over_its_limit(store):
    ks = _keys(store, "")
    limit, each = 50.0, 0.7
    admitted: list[str] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        for i in range(12):
            rid = f"c{n}-{i}"
            if store.usd_hold(hold(ks, (limit,), rid, each)).admitted:
                with lock:
                    admitted.append(rid)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 384 asks of $0.70 against $50: exactly the 71 that fit, never one more.
    assert len(admitted) == int(limit // each) == 71
    spent, held = store.usd_spent(ks[0])
    assert spent == 0.0 and abs(held - 71 * each) < 1e-9
