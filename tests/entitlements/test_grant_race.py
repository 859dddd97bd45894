"""docs/contract.md §2: concurrent approvals on one pool, or on pools that share a failover reserve,
serialise on PostgreSQL row locks; the loser sees the new headroom; nothing is ever oversold.

Sixteen real threads, each with its own database connection, are released together by a
`threading.Barrier` for every trial; 50 trials per test, with the racing rows deleted between
trials. Every race has a negative control: the same race with `lock_pools` replaced by a plain,
lock-free read must oversell at least once in its 50 trials (it stops at the first), so these tests
can fail. Only the controls widen the race window, by sleeping a few ms after `pool_sold_peak`
reads; the locked races run the services unmodified.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models import Sum
from django.utils import timezone

from entitlements import services
from entitlements.models import Entitlement, FailoverReserve, Pool
from entitlements.selectors import pool_sold_now
from entitlements.services import OversellError, entitlement_grant, reserve_set
from tests import factories as f

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

TRIALS = 50
THREADS = 16
WIDEN_S = 0.005
JOIN_GUARD_S = 120  # only stops a deadlocked run from hanging CI; never a performance limit

# Sizes chosen so that any one of them fits the last 1 CU and no two of them do (0.51 + 0.51 > 1).
LAST_CU_SIZES = ("0.510", "0.600", "0.750", "0.999")
# Pool A's grants: any one fits its 5 CU of headroom, no two do, and each one leaves less than
# the 3 CU that growing the reserve from 10 to 13 CU needs.
POOL_A_SIZES = ("2.600", "3.000", "4.000")
RESERVE_CU = Decimal("10.000")
RESERVE_GROWN_CU = Decimal("13.000")


# --------------------------------------------------------------------------- harness


@dataclass(frozen=True)
class Outcome:
    role: str
    size: Decimal | None
    kind: str  # "won" | "oversell" | "error"
    detail: Any

    @property
    def message(self) -> str:
        assert self.kind == "oversell", self
        return self.detail.message_dict["cu"][0]


class Racers:
    """N long-lived threads, one database connection each, released together once per race.

    Threads live for the whole test so a trial costs no connection set-up; each thread closes its
    connections when it ends.
    """

    def __init__(self, n: int) -> None:
        self.n = n
        self.barrier = threading.Barrier(n)
        self.inboxes: list[queue.Queue[Callable[[], Any] | None]] = [queue.Queue() for _ in range(n)]
        self.results: queue.Queue[tuple[int, str, Any]] = queue.Queue()
        self.threads = [threading.Thread(target=self._work, args=(i,), daemon=True) for i in range(n)]
        for t in self.threads:
            t.start()

    def _work(self, i: int) -> None:
        try:
            while (job := self.inboxes[i].get()) is not None:
                try:
                    self.barrier.wait(timeout=JOIN_GUARD_S)
                    self.results.put((i, "won", job()))
                except OversellError as exc:
                    self.results.put((i, "oversell", exc))
                except Exception as exc:  # anything else is reported, and fails the locked races
                    self.results.put((i, "error", exc))
        finally:
            connections.close_all()

    def run(self, jobs: list[Callable[[], Any]]) -> list[tuple[str, Any]]:
        assert len(jobs) == self.n
        for inbox, job in zip(self.inboxes, jobs, strict=True):
            inbox.put(job)
        got = [self.results.get(timeout=JOIN_GUARD_S) for _ in range(self.n)]
        return [(kind, value) for _, kind, value in sorted(got, key=lambda r: r[0])]

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for t in self.threads:
            t.join(timeout=JOIN_GUARD_S)
        assert not any(t.is_alive() for t in self.threads)


@pytest.fixture
def racers() -> Iterator[Racers]:
    r = Racers(THREADS)
    yield r
    r.close()


def unlocked_pools(pool_ids: set[int]) -> dict[int, Pool]:
    """`lock_pools` without `select_for_update`: the negative control."""
    return {p.pk: p for p in Pool.objects.filter(pk__in=sorted(pool_ids)).order_by("pk")}


def disable_locks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(services, "lock_pools", unlocked_pools)


def widen_race_window(monkeypatch: pytest.MonkeyPatch) -> None:
    real = services.pool_sold_peak

    def slow_pool_sold_peak(*args: Any, **kwargs: Any) -> Decimal:
        peak = real(*args, **kwargs)
        time.sleep(WIDEN_S)
        return peak

    monkeypatch.setattr(services, "pool_sold_peak", slow_pool_sold_peak)


def truth(pool: Pool) -> tuple[Decimal, Decimal]:
    """(sold now, deliverable) from the rows themselves: physical − Σ reserves it hosts.

    The test fleet has no maintenance, safety or fragmentation deductions.
    """
    p = Pool.objects.get(pk=pool.pk)
    held = FailoverReserve.objects.filter(host_pool=p).aggregate(s=Sum("cu"))["s"] or Decimal(0)
    return pool_sold_now(p), p.physical_cu - held


def headroom_message(pool: str, *, deliverable: str, sold: Decimal, size: Decimal) -> str:
    left = Decimal(deliverable) - sold
    return (
        f"pool {pool} has {left} CU of headroom left in that window "
        f"(deliverable {deliverable}, already sold {sold}); {size} CU would oversell it"
    )


@pytest.fixture
def setting():
    # Traffic classes and reason codes: put back after earlier flushes by conftest's `_registry`.
    fleet = f.build_fleet()
    start = timezone.now() - timedelta(hours=1)

    def grant(pool: Pool, size: str | Decimal, tenant: Any = None) -> Entitlement:
        return entitlement_grant(
            actor=fleet.operator,
            reason="race",
            **f.grant_kwargs(pool, tenant or fleet.globex, size, start=start, days=30),
        )

    return fleet, grant


# --------------------------------------------------------------------------- sanity of the harness


def test_each_racer_has_its_own_postgresql_connection(racers):
    def backend_pid() -> int:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            return cur.fetchone()[0]

    results = racers.run([backend_pid] * THREADS)
    assert [kind for kind, _ in results] == ["won"] * THREADS
    assert len({pid for _, pid in results}) == THREADS


# --------------------------------------------------------------------------- one pool, the last CU


@dataclass(frozen=True)
class LastCuTrial:
    sold: Decimal
    deliverable: Decimal
    outcomes: list[Outcome]


def race_last_cu(racers: Racers, setting: Any, *, until_oversold: bool = False) -> list[LastCuTrial]:
    """Pool A: 280 CU deliverable, 279 CU sold; 16 grants of 0.51–0.999 CU race for the last 1 CU.

    `until_oversold` (negative controls): stop after the first trial that oversells.
    """
    fleet, grant = setting
    base = grant(fleet.pool_a, "279", tenant=fleet.acme)
    assert truth(fleet.pool_a) == (Decimal("279.000"), Decimal("280.000"))
    sizes = [Decimal(LAST_CU_SIZES[i % len(LAST_CU_SIZES)]) for i in range(THREADS)]
    trials = []
    for _ in range(TRIALS):
        raw = racers.run([lambda s=s: grant(fleet.pool_a, s) for s in sizes])
        outcomes = [Outcome("grant-a", s, kind, v) for s, (kind, v) in zip(sizes, raw, strict=True)]
        sold, deliverable = truth(fleet.pool_a)
        trials.append(LastCuTrial(sold, deliverable, outcomes))
        Entitlement.objects.filter(pool=fleet.pool_a).exclude(pk=base.pk).delete()
        if until_oversold and sold > deliverable:
            break
    return trials


def test_sixteen_grants_race_for_the_last_cu_exactly_one_wins(racers, setting):
    trials = race_last_cu(racers, setting)
    assert len(trials) == TRIALS
    for sold, deliverable, outcomes in ((t.sold, t.deliverable, t.outcomes) for t in trials):
        errors = [o for o in outcomes if o.kind == "error"]
        assert errors == []
        winners = [o for o in outcomes if o.kind == "won"]
        assert len(winners) == 1
        w = winners[0].size
        assert deliverable == Decimal("280.000")
        assert sold == Decimal("279.000") + w
        assert sold <= deliverable
        losers = [o for o in outcomes if o.kind == "oversell"]
        assert len(losers) == THREADS - 1
        # Every loser names the pool and saw the headroom the winner left.
        for o in losers:
            assert o.message == headroom_message("pool-a", deliverable="280.000", sold=sold, size=o.size)


def test_negative_control_without_the_lock_the_last_cu_is_oversold(racers, setting, monkeypatch):
    disable_locks(monkeypatch)
    widen_race_window(monkeypatch)
    trials = race_last_cu(racers, setting, until_oversold=True)
    assert [o for t in trials for o in t.outcomes if o.kind == "error"] == []
    oversold = [t for t in trials if t.sold > t.deliverable]
    assert len(oversold) == 1  # the run stops at the first oversold trial, and there is one
    assert len([o for o in oversold[0].outcomes if o.kind == "won"]) >= 2


# --------------------------------------------------------------------------- two pools, one reserve


@dataclass(frozen=True)
class SharedTrial:
    a: tuple[Decimal, Decimal]
    b: tuple[Decimal, Decimal]
    reserve_cu: Decimal
    stored_reserve_held: Decimal
    outcomes: list[Outcome]

    @property
    def oversold(self) -> bool:
        return self.a[0] > self.a[1] or self.b[0] > self.b[1]


def race_shared_reserve(
    racers: Racers, setting: Any, roles: list[str], *, until_oversold: bool = False
) -> list[SharedTrial]:
    """Pool A (280 physical) hosts a 10 CU reserve protecting pool B (280 physical).

    A: deliverable 270, sold 265 → 5 CU headroom. B: deliverable 280, sold 279 → 1 CU headroom.
    Roles: "grant-a" grants 2.6–4 CU on A, "reserve" grows A's reserve for B to 13 CU (which
    needs A's sold ≤ 267), "grant-b" grants 0.51–0.999 CU on B. `until_oversold` (negative
    controls): stop after the first trial that oversells A or B.
    """
    fleet, grant = setting
    reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=RESERVE_CU)
    # One scope lives in one pool (docs/contract.md §5): pool B's grants come from other tenants.
    b_base, b_racer = f.TenantFactory(slug="initech"), f.TenantFactory(slug="umbrella")
    base = [grant(fleet.pool_a, "265", tenant=fleet.acme).pk, grant(fleet.pool_b, "279", tenant=b_base).pk]
    assert truth(fleet.pool_a) == (Decimal("265.000"), Decimal("270.000"))
    assert truth(fleet.pool_b) == (Decimal("279.000"), Decimal("280.000"))

    sizes: list[Decimal | None] = []
    jobs: list[Callable[[], Any]] = []
    for i, role in enumerate(roles):
        if role == "grant-a":
            size = Decimal(POOL_A_SIZES[i % len(POOL_A_SIZES)])
            jobs.append(lambda s=size: grant(fleet.pool_a, s))
        elif role == "grant-b":
            size = Decimal(LAST_CU_SIZES[i % len(LAST_CU_SIZES)])
            jobs.append(lambda s=size: grant(fleet.pool_b, s, tenant=b_racer))
        else:
            assert role == "reserve"
            size = RESERVE_GROWN_CU
            jobs.append(lambda: reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=RESERVE_GROWN_CU))
        sizes.append(size)

    trials: list[SharedTrial] = []
    for _ in range(TRIALS):
        raw = racers.run(jobs)
        outcomes = [Outcome(r, s, kind, v) for r, s, (kind, v) in zip(roles, sizes, raw, strict=True)]
        reserve = FailoverReserve.objects.get(host_pool=fleet.pool_a, protected_pool=fleet.pool_b)
        trials.append(
            SharedTrial(
                a=truth(fleet.pool_a),
                b=truth(fleet.pool_b),
                reserve_cu=reserve.cu,
                stored_reserve_held=Pool.objects.get(pk=fleet.pool_a.pk).reserve_held_cu,
                outcomes=outcomes,
            )
        )
        Entitlement.objects.filter(pool__in=[fleet.pool_a, fleet.pool_b]).exclude(pk__in=base).delete()
        reserve_set(host_pool=fleet.pool_a, protected_pool=fleet.pool_b, cu=RESERVE_CU)
        if until_oversold and trials[-1].oversold:
            break
    return trials


MIXED_ROLES = ["grant-a"] * 6 + ["reserve"] * 5 + ["grant-b"] * 5
# Negative control only: one grant on A against fifteen reserve resizes, so an oversell of A can
# only come from a grant racing a reserve change, not from two grants racing each other. (With the
# lock, MIXED_ROLES shows the grant and the reserve growth exclude each other in every trial.)
CROSS_ROLES = ["grant-a"] + ["reserve"] * 15


def test_grants_and_reserve_resizes_on_pools_sharing_a_reserve_never_oversell(racers, setting):
    trials = race_shared_reserve(racers, setting, MIXED_ROLES)
    assert len(trials) == TRIALS
    for t in trials:
        by = {role: [o for o in t.outcomes if o.role == role] for role in ("grant-a", "reserve", "grant-b")}
        assert [o for o in t.outcomes if o.kind == "error"] == []
        sold_a, deliverable_a = t.a
        sold_b, deliverable_b = t.b
        assert sold_a <= deliverable_a
        assert sold_b <= deliverable_b
        assert t.stored_reserve_held == t.reserve_cu

        # B: exactly one of the five grants takes the last CU; the others see what it left.
        won_b = [o for o in by["grant-b"] if o.kind == "won"]
        assert len(won_b) == 1
        assert (sold_b, deliverable_b) == (Decimal("279.000") + won_b[0].size, Decimal("280.000"))
        for o in by["grant-b"]:
            if o.kind == "oversell":
                assert o.message == headroom_message("pool-b", deliverable="280.000", sold=sold_b, size=o.size)

        # A: whichever of "a grant" and "the reserve growth" takes the lock first wins, and
        # excludes the other.
        won_a = [o for o in by["grant-a"] if o.kind == "won"]
        if won_a:
            assert len(won_a) == 1
            w = won_a[0].size
            assert (sold_a, deliverable_a, t.reserve_cu) == (Decimal("265.000") + w, Decimal("270.000"), RESERVE_CU)
            for o in by["grant-a"]:
                if o is not won_a[0]:
                    assert o.message == headroom_message("pool-a", deliverable="270.000", sold=sold_a, size=o.size)
            assert [o.message for o in by["reserve"]] == [
                f"pool pool-a has sold {sold_a} CU; a 13.000 CU reserve would leave only 267.000 CU deliverable"
            ] * 5
        else:
            assert (sold_a, deliverable_a, t.reserve_cu) == (Decimal("265.000"), Decimal("267.000"), RESERVE_GROWN_CU)
            assert [(o.kind, o.detail.cu) for o in by["reserve"]] == [("won", RESERVE_GROWN_CU)] * 5
            for o in by["grant-a"]:
                assert o.message == headroom_message("pool-a", deliverable="267.000", sold=sold_a, size=o.size)


@pytest.mark.parametrize("roles", [MIXED_ROLES, CROSS_ROLES], ids=["mixed", "grant-vs-reserve"])
def test_negative_control_without_locks_pools_sharing_a_reserve_are_oversold(racers, setting, monkeypatch, roles):
    disable_locks(monkeypatch)
    widen_race_window(monkeypatch)
    trials = race_shared_reserve(racers, setting, roles, until_oversold=True)
    assert [o for t in trials for o in t.outcomes if o.kind == "error"] == []
    oversold = [t for t in trials if t.oversold]
    assert len(oversold) == 1  # the run stops at the first oversold trial, and there is one
    if roles is CROSS_ROLES:
        # One grant against fifteen reserve growths: the oversell is the grant and the reserve
        # both passing their checks against each other's old state.
        # The grant is 2.6 CU: sold 265 + 2.6 against 280 − 13 deliverable.
        t = oversold[0]
        assert t.outcomes[0].kind == "won"
        assert t.reserve_cu == RESERVE_GROWN_CU
        assert t.a == (Decimal("267.600"), Decimal("267.000"))
