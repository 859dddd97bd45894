"""Reads. Tenant-facing queries go through `visible_to(user)`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from entitlements import roles
from entitlements.activity import active_q
from entitlements.models import Entitlement, EntitlementHistory, FailoverReserve, Pool
from entitlements.models.supply import as_cu


def entitlements_visible_to(user: Any) -> QuerySet[Entitlement]:
    qs = Entitlement.objects.select_related("tenant", "project", "model", "region", "pool", "traffic_class")
    r = roles.roles_of(user)
    if r & roles.STAFF_ROLES or roles.GATEWAY in r:
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None:
        return qs.none()
    return qs.filter(tenant=tenant)


def active_at(qs: QuerySet[Entitlement], t: datetime) -> QuerySet[Entitlement]:
    return qs.filter(active_q(t))


def overlapping(qs: QuerySet[Entitlement], start: datetime, end: datetime | None) -> QuerySet[Entitlement]:
    qs = qs.filter(revoked_at__isnull=True).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))
    if end is not None:
        qs = qs.filter(starts_at__lt=end)
    return qs


def sold_entitlements(pool: Pool) -> QuerySet[Entitlement]:
    return Entitlement.objects.filter(pool=pool, traffic_class__counts_as_sold=True)


def scope_entitlements(
    *, tenant: Any, project: Any, model: Any, region: Any, traffic_class: str
) -> QuerySet[Entitlement]:
    """The live (not revoked) entitlements of one admission scope (docs/contract.md §5: one scope, one pool)."""
    qs = Entitlement.objects.filter(
        tenant=tenant,
        model=model,
        region=region,
        traffic_class_id=traffic_class,  # type: ignore[misc]  # keyed by slug (to_field); the stubs assume an int id
        revoked_at__isnull=True,
    )
    return qs.filter(project=project) if project is not None else qs.filter(project__isnull=True)


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime | None


Row = tuple[datetime, datetime | None, Decimal]


def sold_steps_in(rows: Iterable[Row], window: Window) -> list[tuple[datetime, Decimal]]:
    """sold(t) over the window as steps [(instant, Σ CU active from then on)], in one sweep.

    One pass over the start (+cu) and end (−cu) events sorted by time: O(n log n). Every event at
    one instant is applied before that instant's step is read, because an entitlement ending at t
    is not active at t (`ends_at > t`) while one starting at t is: the two are never summed together.
    Rows outside the window are ignored, so callers may pass more than overlaps it.
    """
    events: list[tuple[datetime, int, Decimal]] = []
    for s, e, cu in rows:
        if (e is not None and e <= window.start) or (window.end is not None and s >= window.end):
            continue
        events.append((max(s, window.start), 1, cu))
        if e is not None and (window.end is None or e < window.end):
            events.append((e, 0, -cu))
    events.sort(key=lambda ev: (ev[0], ev[1]))
    steps: list[tuple[datetime, Decimal]] = [(window.start, Decimal(0))]
    total = Decimal(0)
    for t, _, delta in events:
        total += delta
        if t == steps[-1][0]:
            steps[-1] = (t, total)
        else:
            steps.append((t, total))
    return steps


def peak_sold(rows: Iterable[Row], window: Window) -> Decimal:
    """Max over the window of Σ CU active at t (sold(t) is a step function: its max is a step)."""
    return max(total for _, total in sold_steps_in(rows, window))


def pool_sold_peak(pool: Pool, window: Window, *, exclude_pk: int | None = None) -> Decimal:
    qs = overlapping(sold_entitlements(pool), window.start, window.end)
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    return peak_sold_in_db(qs, window)


def peak_sold_in_db(qs: QuerySet[Entitlement], window: Window) -> Decimal:
    """`peak_sold` over these rows as one SQL window query (PostgreSQL and SQLite): the same sweep
    (starts clipped to the window, +cu at each start, −cu at each end inside it, every event at one
    instant applied before the running sum is read), without moving the rows out of the database.
    At 10,000 entitlements on a pool, reading them into Python was most of an approval's time."""
    return peaks_sold_in_db(qs, window).get(None, Decimal(0))


def pools_sold_peaks(pool_ids: Iterable[int], window: Window) -> dict[int, Decimal]:
    """pool → its sold peak over the window (pool_sold_peak's figure), for a pool set in one query."""
    ids = sorted(set(pool_ids))
    qs = Entitlement.objects.filter(pool_id__in=ids, traffic_class__counts_as_sold=True)
    qs = overlapping(qs, window.start, window.end)
    got = peaks_sold_in_db(qs, window, key="pool_id")
    return {pk: got.get(pk, Decimal(0)) for pk in ids}


def sold_events_sql(qs: QuerySet[Entitlement], window: Window, key: str | None) -> tuple[str, list[Any]]:
    """The sweep's events as SQL: `events(k, t, d)`, +cu at each start (clipped to the window), −cu at
    each end inside it; `k` the row's `key` column (a pool id), or 0 for one group; `steps(k, t, total, delta)`
    the running total after each instant and that instant's change. Every read of sold(t)
    in the database (the peak approval checks, the availability's days) is built on these events."""
    cols = ("starts_at", "ends_at", "cu", *((key,) if key else ()))
    rows_sql, rows_params = qs.order_by().values_list(*cols).query.sql_with_params()
    adapt = connection.ops.adapt_datetimefield_value
    start = adapt(window.start)
    end_clause, end_params = ("", []) if window.end is None else (" AND e < %s", [adapt(window.end)])
    names, k = ("s, e, cu, k", "k") if key else ("s, e, cu", "0")
    sql = (
        f"sold_rows({names}) AS ({rows_sql}), "  # noqa: S608 - the ORM's own SQL and parameters
        f"events(k, t, d) AS (SELECT {k}, CASE WHEN s < %s THEN %s ELSE s END, cu FROM sold_rows "
        f"UNION ALL SELECT {k}, e, -cu FROM sold_rows WHERE e IS NOT NULL{end_clause}), "
        "steps(k, t, total, delta) AS "
        "(SELECT k, t, SUM(SUM(d)) OVER (PARTITION BY k ORDER BY t), SUM(d) FROM events GROUP BY k, t)"
    )
    return sql, [*rows_params, start, start, *end_params]


def peaks_sold_in_db(qs: QuerySet[Entitlement], window: Window, *, key: str | None = None) -> dict[int | None, Decimal]:
    """The sold peak over the window per `key` (None: all rows as one group, keyed None)."""
    events, params = sold_events_sql(qs, window, key)
    with connection.cursor() as cur:
        cur.execute(f"WITH {events} SELECT k, MAX(total) FROM steps GROUP BY k", params)  # noqa: S608
        rows = cur.fetchall()
    # SQLite sums decimals as floats: CU are stored to 3 decimals, so rounding there restores them.
    return {(k if key else None): max(Decimal(0), as_cu(peak or 0)) for k, peak in rows}


def pool_sold_now(pool: Pool, at: datetime | None = None) -> Decimal:
    """Σ CU sold at one instant (the race tests' oversell check reads this)."""
    t = at or timezone.now()
    return pool_sold_peak(pool, Window(t, t + timedelta(microseconds=1)))


def pools_with_totals(at: datetime | None = None) -> list[dict[str, Any]]:
    """Every pool with physical, deliverable, sold and headroom now: the operator's main table."""
    t = at or timezone.now()
    pools = list(
        Pool.objects.select_related("model", "region", "accelerator", "operating_point__model").prefetch_related(
            "zones__zone", "reserves_held__protected_pool", "reserves_held__protected_zone"
        )
    )
    sold: dict[int, Decimal] = {}
    for pool_id, cu in active_at(Entitlement.objects.filter(traffic_class__counts_as_sold=True), t).values_list(
        "pool_id", "cu"
    ):
        sold[pool_id] = sold.get(pool_id, Decimal(0)) + cu
    out = []
    for p in pools:
        b = p.breakdown()
        deliverable = as_cu(b.deliverable)
        s = sold.get(p.pk, Decimal(0))
        out.append(
            {
                "pool": p,
                "breakdown": b,
                "physical_cu": as_cu(b.physical),
                "deliverable_cu": deliverable,
                "sold_cu": s,
                "headroom_cu": deliverable - s,
            }
        )
    return out


def entitlement_history(ent: Entitlement, limit: int = 50) -> list[EntitlementHistory]:
    """The newest history rows of one entitlement for its page (the API and admin list them all)."""
    rows = EntitlementHistory.objects.filter(entitlement_id=ent.pk).select_related("actor").order_by("-pk")
    return list(rows[:limit])


def snapshot_entitlement_rows(at: datetime, *extra: str) -> QuerySet[Entitlement, dict[str, Any]]:
    """The gateway snapshot's entitlements: those active at `at`, in pk order, as flat rows of
    identity, slugs, rate terms and the model's weights, plus the `extra` fields the snapshot
    nests (envelope, limits). entitlements.api.snapshot shapes them."""
    return (
        active_at(Entitlement.objects.all(), at)
        .order_by("pk")
        .values(
            "uuid",
            "tenant__slug",
            "project__slug",
            "model__slug",
            "region__slug",
            "pool__slug",
            "traffic_class_id",
            "cu",
            "borrowing_limit_cu",
            "traffic_class__may_borrow",
            "overage",
            "max_concurrency",
            "version",
            "model__r_wt_per_s",
            "model__w_out",
            "model__w_cached",
            *extra,
        )  # fmt: skip
    )


def snapshot_pool_rows() -> QuerySet[Pool, dict[str, Any]]:
    """The gateway snapshot's pools in slug order: the supply terms of the deliverable formula."""
    return Pool.objects.order_by("slug").values(  # type: ignore[return-value]  # a TypedDict row is a dict
        "slug", "model__slug", "region__slug", "physical_cu", "reserve_held_cu", "maintenance_pct", "safety_pct",
        "fragmentation_pct", "model__r_wt_per_s",
    )  # fmt: skip


def failover_reserves() -> QuerySet[FailoverReserve]:
    """Every failover reserve with the pools and zone it names loaded (the operator home's notes)."""
    return FailoverReserve.objects.select_related("host_pool", "protected_pool", "protected_zone")
