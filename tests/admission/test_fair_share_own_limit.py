"""Issue 48.3: fair share never keeps room idle for a borrower its own limit holds back (docs/lending.md).

Two borrowers contend for a lend bucket of 1,000 wt/s: w1 (weight 1) asks 5,000 wt/s; w3 (weight 3) asks
as much but its own borrowing limit lets it take 100 wt/s. Before the fix w3 counted as active for
`active_s` after each admission although its own bucket refused it meanwhile, and w1 was held to a
quarter of the room: the rest stayed idle (the review saw 159 refusals with 5.5 M wt free, and a split
the inverse of the weights). Now a borrower counts as active only while its own limit would let it take
what it last asked, and w1 is refused only while the room it would take is owed to w3: w3 gets its
limit's worth, w1 the rest, and the lend bucket never holds more than one request beyond what w3 is owed.

Memory runs on a simulated clock (exact figures). Redis reads its own clock; its run is replayed call by
call on the in-process twin at the time Redis answered each call, and must decide every call alike.
"""

from __future__ import annotations

import hashlib

import pytest

from admission.backends import fair
from admission.backends import memory as memory_backend
from tests.admission.test_backend_contract import Clock, _decision, _key, borrower, reserve

LEND = (1000.0, 10_000.0)  # the lenders' limit: 1,000 wt/s, 10 s deep
W3_LIMIT = (100.0, 100.0)  # w3's own borrowing limit: 100 wt/s, one request deep
ACTIVE_RULE = "    elseif f[4] > now and (not f[8] or can_take(f, now) >= f[8]) then\n"
CAN_TAKE = "  if not f[8] then return math.huge end\n"


def _ask(m):
    if m == "w1":
        return borrower("w1", weight=1.0, lend=LEND)
    return borrower("w3", weight=3.0, lend=LEND, borrow=W3_LIMIT)


def _run(store, steps):
    """Both ask once per 0.02 s step (5,000 wt/s each), alternating who goes first. → (admitted wt per
    borrower, w1's fair_share refusals, the calls (member, the store's clock, decision), elapsed s)."""
    clock = Clock(store)
    admitted, refused_w1, calls = {"w1": 0.0, "w3": 0.0}, 0, []
    for i in range(steps):
        for m in ("w1", "w3") if i % 2 == 0 else ("w3", "w1"):
            got = reserve(store, _ask(m))
            calls.append((m, float(got.quota.rsplit("|", 1)[1]), _decision(got)))
            if got.admitted:
                admitted[m] += 100.0
            elif m == "w1" and got.raw.endswith("|fair_share"):
                refused_w1 += 1
        clock.step(0.02)
    return admitted, refused_w1, calls, clock.elapsed()


def _same_on_the_twin(calls):
    """The Redis run's calls replayed on a MemoryBackend whose clock reads the time Redis answered each."""
    twin, at = memory_backend.MemoryBackend(), [0.0]
    twin.clock = lambda: at[0]
    replayed = []
    for m, t, _ in calls:
        at[0] = t
        replayed.append((m, t, _decision(twin.reserve(_ask(m)))))
    return replayed


def test_a_borrower_held_back_by_its_own_limit_keeps_no_room_idle(store):
    redis = hasattr(store, "client")
    admitted, refused_w1, calls, t = _run(store, 1500 if redis else 3000)
    total = admitted["w1"] + admitted["w3"]
    print(f"{t:.2f} s: admitted {admitted}, w1 refused fair_share {refused_w1}")
    if redis:
        assert _same_on_the_twin(calls) == calls
    # w3 takes what its own limit lets it: at most its depth plus its rate; at least its rate less the
    # wait for the room one request needs each time its bucket refills (c / lend rate: 0.1 s a second).
    span = calls[-1][1] - calls[0][1]
    assert W3_LIMIT[0] * span / 1.1 - 100.0 <= admitted["w3"] <= W3_LIMIT[1] + W3_LIMIT[0] * span + 1e-6
    # ...and the lendable room is given out: the lend bucket's depth and what it refilled between its first
    # charge and its last (never full again), less what it holds now: at most one request beyond what w3
    # is owed while it could take room (one request).
    level, at = store.bucket_state(_key(store, "ln:1"))
    assert level < 200.0
    assert total == pytest.approx(LEND[1] - level + LEND[0] * (at - first_charge(calls)), abs=1e-6)
    if not redis:  # exact on the simulated clock: 60 s, 70,000 wt lendable
        assert (admitted, refused_w1) == ({"w1": 64_400.0, "w3": 5_500.0}, 26)


def first_charge(calls):
    """When the lend bucket was first charged: the first admission's time by the store's clock."""
    return next(t for _, t, d in calls if d[0] == "A")


def test_negative_control_counting_it_active_while_its_limit_refuses_it_leaves_room_idle(store, monkeypatch):
    redis = hasattr(store, "client")
    if redis:
        # The old rule in the script: a recent entry is active, whatever its own limit lets it take.
        script = store._reserve
        src = script.source.decode()
        assert src.count(ACTIVE_RULE) == 1 and src.count(CAN_TAKE) == 1
        src = src.replace(ACTIVE_RULE, "    elseif f[4] > now then\n").replace(
            CAN_TAKE, "  if true then return math.huge end\n"
        )
        script.source = src.encode()
        script.sha = hashlib.sha1(script.source).hexdigest().encode()  # noqa: S324
    else:
        monkeypatch.setattr(fair, "active", lambda f, now: f[3] > now)  # the old rule: recent is active
        monkeypatch.setattr(fair, "can_take", lambda f, now: float("inf"))
    admitted, refused_w1, calls, t = _run(store, 1500 if redis else 3000)
    level, _ = store.bucket_state(_key(store, "ln:1"))
    print(f"old rule, {t:.2f} s: admitted {admitted}, w1 refused fair_share {refused_w1}, lend level {level:.0f}")
    # w1 is held to a share computed as if w3 could take room: lendable room stays in the bucket.
    assert level > 1000.0


NEED_RULE = "  return room - c >= need\n"


def _over_share_sequence(store):
    """Rates 0 (levels exact on both stores): w1 borrows 1,000 wt alone, then w3 (weight 3, its own limit
    250 wt deep) borrows 100, then w1 and w3 ask in turn. → each call's decision."""
    lend = (0.0, 3000.0)
    Clock(store)  # the in-process store's clock held still (Redis' runs; the levels do not refill)

    def ask(m):
        if m == "w1":
            return _decision(reserve(store, borrower("w1", weight=1.0, lend=lend, borrow=(0.0, 10**9))))
        return _decision(reserve(store, borrower("w3", weight=3.0, lend=lend, borrow=(0.0, 250.0))))

    return [ask(m) for m in ["w1"] * 10 + ["w3"] + ["w1"] * 20 + ["w3", "w1", "w3"]]


def test_over_its_share_a_borrower_is_refused_only_for_room_a_more_deserving_one_could_take(store):
    got = _over_share_sequence(store)
    fair_share, borrowed = "T|QUOTA_EXCEEDED|1|fair_share", ("A", "borrowed")
    # w1 holds 1,000 of a 3,000 pie (its share is 750) but w3's own limit lets it take only 150 more:
    # w1 is admitted while it leaves those 150 (17 requests: room 1,900 → 200), then refused...
    assert got[:11] == [borrowed] * 11
    assert got[11:28] == [borrowed] * 17 and got[28:31] == [fair_share] * 3
    # ...w3 takes its 100 (50 left under its limit: it no longer counts as active), w1 the last room.
    assert got[31:] == [borrowed, borrowed, "T|QUOTA_EXCEEDED|3600"]  # w3's own limit now: never refills
    assert store.level(_key(store, "ln:1")) == 0.0


def test_negative_control_over_its_share_always_refused_leaves_room_idle(store, monkeypatch):
    if hasattr(store, "client"):
        script = store._reserve
        src = script.source.decode()
        assert src.count(NEED_RULE) == 1
        script.source = src.replace(NEED_RULE, "  return false\n").encode()
        script.sha = hashlib.sha1(script.source).hexdigest().encode()  # noqa: S324
    else:
        monkeypatch.setattr(fair, "fair_ok", lambda mine, weight, pie, weights, *_: mine * weights <= pie * weight)
    got = _over_share_sequence(store)
    assert got[11] == "T|QUOTA_EXCEEDED|1|fair_share"  # 1,900 wt lendable, w3 could take 150 of it


def test_an_entry_written_before_the_fix_is_read_as_active_while_recent(store):
    # Deploy: the fair-share table may hold 4-field entries ('u|at|w|until') from the old script; they
    # read as recent borrowers whose own limit is unknown (can take anything), never as an error.
    Clock(store)
    if hasattr(store, "client"):
        sec, _ = store.client.time()
        store.client.hset(_key(store, "fs:1"), "old", f"0.0|{sec}|3.0|{sec + 3600}")
    else:
        store._s.fair["fs:1"] = {"old": [0.0, store.clock(), 3.0, store.clock() + 3600]}
    lend = (0.0, 1000.0)
    got = [_decision(reserve(store, borrower("new", weight=1.0, lend=lend))) for _ in range(4)]
    # new's share is a quarter of 1,000 (what it holds plus the room): past it, the 750 the old entry is
    # owed (it holds nothing, its limit unknown) is more than the 600 new would leave: refused.
    assert got == [("A", "borrowed")] * 3 + ["T|QUOTA_EXCEEDED|1|fair_share"]
    state = store.fair_state(_key(store, "fs:1"), 60.0)
    assert state["old"][1:] == (3.0, True) and state["new"][1:] == (1.0, True)
