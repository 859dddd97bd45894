"""Orders that close a supply gap: the fewest replicas which, placed across zones, make both the
healthy and the after-failure deliverable cover the demand in every week of the horizon
(docs/planning.md, issue 30.4).

Placement: each new replica goes to the zone with the fewest (ties to the first), the rule the gap
itself uses for pending orders, so an order placed exactly as recommended is counted exactly as
checked. With that placement both deliverables are non-decreasing in the number ordered (healthy
grows with every replica; after losing the largest zone, a replica added to a smaller zone is kept
and one added when all zones are equal only moves the loss), so the least order is a search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from capacity.deliverable import PoolSupply, deliverable, deliverable_under_failure
from capacity.failure import FailurePolicy

# Past this many replicas of one pool an order is not a purchase but a new fleet: say so instead.
MAX_ORDER = 100_000


def add_replicas(per_zone: tuple[int, ...], extra: int) -> tuple[int, ...]:
    """New replicas go to the smallest zone first, the way a planner keeps zones balanced."""
    zones = list(per_zone) or [0]
    for _ in range(extra):
        zones[zones.index(min(zones))] += 1
    return tuple(zones)


@dataclass(frozen=True)
class Order:
    """`replicas` None: no whole number of replicas closes the gap (`reason` says why)."""

    replicas: int | None
    added_per_zone: tuple[int, ...]
    week: int  # the week whose demand needs the most replicas (index into the horizon)
    demand_cu: float
    healthy_cu: float  # that week's deliverables with the order added
    failure_cu: float
    reason: str = ""

    @property
    def closes(self) -> bool:
        return self.replicas is not None


def _covers(supply: PoolSupply, policy: FailurePolicy, demand: float, as_cu: Callable[[float], float]) -> bool:
    need = as_cu(demand)
    return (
        as_cu(deliverable(supply).deliverable) >= need
        and as_cu(deliverable_under_failure(supply, policy).deliverable) >= need
    )


def least_whole(ok: Callable[[int], bool], cap: int) -> int | None:
    """The least k in 0..cap with ok(k), for an ok that stays true once true (more replicas never cover
    less): doubling, then bisection. None when not even cap does."""
    if ok(0):
        return 0
    hi = 1
    while not ok(hi):
        if hi >= cap:
            return None
        hi = min(cap, hi * 2)
    lo = hi // 2  # ok(lo) is false: lo is 0 or the last failed doubling
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _least(
    supply: PoolSupply, policy: FailurePolicy, demand: float, as_cu: Callable[[float], float], cap: int
) -> int | None:
    def ok(k: int) -> bool:
        return _covers(
            replace(supply, replicas_per_zone=add_replicas(supply.replicas_per_zone, k)), policy, demand, as_cu
        )

    return least_whole(ok, cap)


def order_to_close(
    weekly_supply: Sequence[PoolSupply],
    weekly_demand: Sequence[float],
    policy: FailurePolicy,
    *,
    as_cu: Callable[[float], float] = float,
    cap: int = MAX_ORDER,
) -> Order:
    """The least order that covers every week's demand in both cases (each week's supply already
    holds the orders arriving by then). `as_cu` rounds both sides as the caller compares them."""
    if len(weekly_supply) != len(weekly_demand):
        raise ValueError("weekly_supply and weekly_demand must be the same length")
    if not weekly_supply:
        return Order(0, (), 0, 0.0, 0.0, 0.0)
    if policy.kind == "zone" and len(weekly_supply[0].replicas_per_zone) < 2:
        worst = max(range(len(weekly_demand)), key=lambda i: weekly_demand[i])
        if as_cu(weekly_demand[worst]) > 0:
            s = weekly_supply[worst]
            return Order(
                None,
                (),
                worst,
                weekly_demand[worst],
                deliverable(s).deliverable,
                deliverable_under_failure(s, policy).deliverable,
                "the pool has one zone and its failure policy loses a whole zone: no number of replicas in it "
                "survives that; the after-failure gap needs a second zone (or a reserve elsewhere)",
            )
    best, at = 0, 0
    for i, (s, d) in enumerate(zip(weekly_supply, weekly_demand, strict=True)):
        k = _least(s, policy, d, as_cu, cap)
        if k is None:
            return Order(
                None,
                (),
                i,
                d,
                deliverable(s).deliverable,
                deliverable_under_failure(s, policy).deliverable,
                f"more than {cap:,} replicas of this pool would be needed to cover {as_cu(d):,} CU in both cases",
            )
        if k > best:
            best, at = k, i
    s = weekly_supply[at]
    placed = add_replicas(s.replicas_per_zone, best)
    after = replace(s, replicas_per_zone=placed)
    added = tuple(a - b for a, b in zip(placed, s.replicas_per_zone or (0,), strict=False))
    return Order(
        best,
        added,
        at,
        weekly_demand[at],
        deliverable(after).deliverable,
        deliverable_under_failure(after, policy).deliverable,
    )
