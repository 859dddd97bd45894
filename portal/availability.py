"""Where asked capacity could be granted, before anyone asks an approver (issue 52, docs/contract.md §11).

One row per pool serving the model, the asked regions first:

- `available_cu`: the approval's own figure. `entitlements.pool_choice.headroom_rows` (what
  `entitlement_grant` checks: deliverable − the most sold at any instant of the window) for the whole pool
  set in one query, and 0 where the one-scope-one-pool rule would refuse the grant (the asker's scope in
  that region already lives in another pool). Approving exactly that much succeeds; 0.001 CU more is refused.
- `available_from`: the first date a window as long as the asked one fits the asked CU, counting the
  commitments that end and the supply orders placed (planned or ordered) from their arrival date.
- `replicas_to_add`: the fewest replicas whose deliverable covers the rest (capacity.deliverable over the
  catalogue's CU per replica, capacity.units), 0 when it fits.
- `why`, in words; it names pools and the asker's own scope, never another tenant.

Forecast-aware: where the ask fits today but the newest forecast's expected demand on the pool, over the
weeks from today to the window's end, leaves less than the ask, the row says so and is not marked best.

Bounded work: a fixed number of queries whatever the number of pools or entitlements (pools, peaks, sold(t)'s
change points, orders, scope homes, forecast); the date search and the forecast's weeks are range maxima over
the change points (entitlements.sold_profile), not a read per day.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

import numpy as np

from capacity.deliverable import PoolSupply, deliverable
from capacity.planning_orders import add_replicas, least_whole
from entitlements.models import Entitlement, Pool, Region, ServedModel, TrafficClass
from entitlements.models.supply import as_cu
from entitlements.pool_choice import headroom_rows
from entitlements.selectors import Window
from entitlements.sold_profile import Steps, sold_steps, us
from forecasting.models import PoolDemand, SupplyOrder
from forecasting.selectors import latest_run
from portal.selectors import day_start, window_of

SEARCH_DAYS = 400  # how far past the asked start available_from looks (and the longest window asked)
WEEK_H = 168
DAY_US = 86_400_000_000


@dataclass(frozen=True)
class Ask:
    model: ServedModel
    regions: Sequence[Region]  # the asked regions, listed first in this order
    cu: Decimal
    start: date
    until: date | None
    traffic_class: TrafficClass
    tenant: Any = None  # the asker's tenant (its scope's home pools); None for platform people


@dataclass
class Row:
    pool: Pool
    available_cu: Decimal
    available_from: date | None
    replicas_to_add: int | None
    why: str
    fits: bool
    asked_region: bool
    forecast_left_cu: Decimal | None = None  # set where the forecast leaves less than the ask
    best: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pool": self.pool.slug,
            "region": self.pool.region.slug,
            "accelerator": self.pool.accelerator.slug,
            "available_cu": str(self.available_cu),
            "available_from": self.available_from.isoformat() if self.available_from else None,
            "replicas_to_add": self.replicas_to_add,
            "why": self.why,
            "best": self.best,
        }


def _deliverable(supply: PoolSupply, extra: int) -> Decimal:
    if extra:
        supply = replace(supply, replicas_per_zone=add_replicas(supply.replicas_per_zone, extra))
    return as_cu(deliverable(supply).deliverable)


def replicas_for_rest(supply: PoolSupply, peak: Decimal, cu: Decimal, cap: int = 100_000) -> int | None:
    """The fewest replicas (placed as planning places orders) after which deliverable − peak ≥ cu;
    None when no number up to `cap` does (a replica adds nothing once the deductions take it all)."""

    def ok(k: int) -> bool:
        return _deliverable(supply, k) - peak >= cu

    return least_whole(ok, cap)


def _homes(ask: Ask) -> dict[int, int]:
    """region → the pool the asker's scope lives in there (entitlements.services.scope_pool_id's rule, the
    first live entitlement of the scope, for every region in one query)."""
    if ask.tenant is None:
        return {}
    qs = Entitlement.objects.filter(
        tenant=ask.tenant,
        project__isnull=True,
        model=ask.model,
        traffic_class_id=ask.traffic_class.slug,  # type: ignore[misc]  # keyed by slug (to_field)
        revoked_at__isnull=True,
    ).order_by("pk")
    homes: dict[int, int] = {}
    for region_id, pool_id in qs.values_list("region_id", "pool_id"):
        homes.setdefault(region_id, pool_id)
    return homes


class _Supply:
    """A pool's deliverable on each day, with the pending orders counted from their arrival date."""

    def __init__(self, pool: Pool, orders: list[SupplyOrder], today: date) -> None:
        self.base = pool.supply()
        self.orders = sorted(orders, key=lambda o: o.arrival_date)
        self.today = today
        self._cache: dict[int, Decimal] = {}

    def arrived(self, day: date) -> int:
        return sum(o.replicas for o in self.orders if o.arrival_date <= day)

    def room_milli(self, offset: int, n: int) -> np.ndarray:
        """Deliverable in milli-CU on the n days from today + offset: it changes only on arrival dates."""
        room = np.full(n, int(self.on(self.today + timedelta(days=offset)) * 1000), dtype=np.int64)
        for o in self.orders:
            i = (o.arrival_date - self.today).days - offset
            if 0 < i < n:
                room[i:] = int(self.on(o.arrival_date) * 1000)
        return room

    def on(self, day: date) -> Decimal:
        n = self.arrived(day)
        if n not in self._cache:
            self._cache[n] = _deliverable(self.base, n)
        return self._cache[n]


def _first_fit(ask: Ask, steps: Steps, supply: _Supply, offset: int, length: int | None) -> tuple[date | None, bool]:
    """(the first start date ≥ the asked one whose window fits, whether an order made it fit), in
    milli-CU integers: exact, as the approval compares at 0.001 CU."""
    n = SEARCH_DAYS + 1
    first = us(day_start(supply.today)) + offset * DAY_US
    starts = first + DAY_US * np.arange(n, dtype=np.int64)  # each candidate start's midnight
    most = steps.peaks_milli(starts, None if length is None else length * DAY_US)
    room = supply.room_milli(offset, n)
    fit = np.flatnonzero(most + int(ask.cu * 1000) <= room)
    if not len(fit):
        return None, False
    i = int(fit[0])
    return supply.today + timedelta(days=offset + i), room[i] > int(supply.on(supply.today) * 1000)


def _forecast_left(
    pd: PoolDemand | None, steps: Steps, supply: _Supply, until: date | None
) -> tuple[Decimal, date] | None:
    """The tightest week from today to the window's end (or the horizon): deliverable − the larger of the
    expected demand's peak hour and the most sold that week, and the week's start."""
    if pd is None:
        return None
    expected = pd.hourly.get("expected") or []
    worst: tuple[Decimal, date] | None = None
    for w in range(len(expected) // WEEK_H):
        ws = (pd.start + timedelta(weeks=w)).date()
        we = ws + timedelta(weeks=1)
        if we <= supply.today:
            continue
        if until is not None and ws >= until:
            break
        sold = steps.peak(day_start(max(ws, supply.today)), day_start(we))
        demand = max(as_cu(max(expected[w * WEEK_H : (w + 1) * WEEK_H])), sold)
        left = supply.on(max(ws, supply.today)) - demand
        if worst is None or left < worst[0]:
            worst = (left, ws)
    return worst


def availability(ask: Ask, *, today: date) -> list[Row]:
    pools = list(
        Pool.objects.filter(model=ask.model)
        .select_related("region", "accelerator", "operating_point__model")
        .prefetch_related("zones")
    )
    order = {r.pk: i for i, r in enumerate(ask.regions)}
    pools.sort(key=lambda p: (order.get(p.region_id, len(order)), p.region.slug, p.pk))
    if not pools:
        return []
    window = window_of(ask.start, ask.until)
    headroom = {p.pk: h for p, h in headroom_rows(pools, window)}
    homes = _homes(ask)
    offset = (ask.start - today).days
    length = None if ask.until is None else (ask.until - ask.start).days
    span = None if length is None else offset + SEARCH_DAYS + length + 1
    first = day_start(today)
    steps = sold_steps([p.pk for p in pools], Window(first, None if span is None else first + timedelta(days=span)))
    orders: dict[int, list[SupplyOrder]] = {}
    for o in SupplyOrder.objects.filter(pool__in=pools, status__in=SupplyOrder.PENDING):
        orders.setdefault(o.pool_id, []).append(o)
    run = latest_run()
    demand = {pd.pool_id: pd for pd in PoolDemand.objects.filter(run=run, pool__in=pools)} if run else {}
    rows = [
        _row(
            ask, p, headroom[p.pk], homes, steps[p.pk], _Supply(p, orders.get(p.pk, []), today), demand, offset, length
        )
        for p in pools
    ]
    _mark_best(rows)
    return rows


def _row(
    ask: Ask,
    pool: Pool,
    headroom: Decimal,
    homes: dict[int, int],
    steps: Steps,
    supply: _Supply,
    demand: dict[int, PoolDemand],
    offset: int,
    length: int | None,
) -> Row:
    asked = any(r.pk == pool.region_id for r in ask.regions)
    home = homes.get(pool.region_id)
    scope = f"your {ask.traffic_class.slug} scope for {ask.model.slug} in {pool.region.slug}"
    if home is not None and home != pool.pk:
        why = f"{scope} already lives in another pool: grants there go to it (one scope, one pool), not to this one"
        return Row(pool, Decimal(0), None, None, why, False, asked)
    available = max(Decimal(0), headroom)
    if not ask.traffic_class.counts_as_sold:
        why = f"{ask.traffic_class.slug} takes no headroom: any CU is granted, none guaranteed ({available} CU unsold)"
        return Row(pool, available, ask.start, 0, why, True, asked)
    lived = f"; {scope} already lives here" if home == pool.pk else ""
    if available >= ask.cu:
        row = Row(pool, available, ask.start, 0, f"fits: {available} CU free over the window, {ask.cu} asked{lived}",
                  True, asked)  # fmt: skip
        left = _forecast_left(demand.get(pool.pk), steps, supply, ask.until)
        if left is not None and left[0] < ask.cu:
            row.forecast_left_cu = max(Decimal(0), left[0])
            row.why = (
                f"fits today; expected demand leaves {row.forecast_left_cu} CU by {left[1]:%B %Y} "
                f"({ask.cu} asked, the forecast's expected scenario){lived}"
            )
        return row
    short = ask.cu - available
    replicas = replicas_for_rest(pool.supply(), pool.deliverable_cu - headroom, ask.cu)
    need = (
        f"{replicas} more {'replica' if replicas == 1 else 'replicas'} of {pool.cu_per_replica:.2f} CU"
        f"{'' if replicas == 1 else ' each'} would cover it"
        if replicas is not None
        else "no number of replicas covers it"
    )
    when, by_order = _first_fit(ask, steps, supply, offset, length)
    if when is None:
        later = f"no start within {SEARCH_DAYS} days fits, counting the orders placed"
    elif by_order:
        later = f"fits from {when.isoformat()} once the {supply.arrived(when)} replicas ordered have arrived"
    else:
        later = f"fits from {when.isoformat()}, as commitments end"
    why = f"{available} CU free over the window, {ask.cu} asked: {short} CU short; {need}; {later}{lived}"
    return Row(pool, available, when, replicas, why, False, asked)


def _mark_best(rows: list[Row]) -> None:
    """The best row: one that fits today and stays fitting by the forecast, in an asked region, with the most
    left after the ask (ties to the lowest pk, the pool rule's tie-break); failing that the earliest
    available_from."""
    fitting = [r for r in rows if r.fits]
    if fitting:
        best = min(
            fitting, key=lambda r: (r.forecast_left_cu is not None, not r.asked_region, -r.available_cu, r.pool.pk)
        )
    else:
        later = [r for r in rows if r.available_from is not None]
        if not later:
            return
        best = min(later, key=lambda r: (r.available_from, not r.asked_region, r.pool.pk))
    best.best = True
