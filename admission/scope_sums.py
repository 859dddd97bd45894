# ruff: noqa: S608 - SQL built only from this module's constants, never input
"""The snapshot's scopes summed by the database (issue 19.2): one GROUP BY per read, so Python loops
over groups (hundreds), not entitlements (10,000s), and the rows never cross the wire.

Rows are grouped by scope, pool and window (starts, ends): a scope can span pools (reserved and sold
are per row's pool), and a group starts and ends as one row would, so when a window starts or ends
the held groups are derived again without a query. Entitlements sold together share a window, so
groups are far fewer than rows. `derive` gives the same result as admission.params.derive_scopes over
entitlement_rows (the row-by-row specification, tested equal on a varied fixture): rates and
borrowing add up, the envelope is the widest, concurrency adds up, the scope names its lowest-pk
entitlement, budgets combine in pk order (the few rows with limits are held as rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Case, Q, TextField, Value, When

from admission import budgets
from admission.budgets import LimitSpec
from admission.snapshot_reads import Epoch, TextCast
from admission.snapshot_types import ScopeParams
from entitlements.models import Entitlement

Key = tuple[str, str, str, str, str]
LIMIT_FIELDS = ("daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst")
HAS_LIMITS = Q(daily_budget__isnull=False) | Q(monthly_budget__isnull=False) | Q(max_rps__isnull=False)

# Aggregated on the entitlement table alone, by ids and window (sorted or hashed on integers and
# timestamps), then joined to the slugs and catalogue columns for the groups only: grouping by the
# joined text slugs cost a collation-aware sort of every row. {epoch} is the backend's timestamp →
# epoch seconds, as admission.snapshot_reads.Epoch.
SQL = """
SELECT t.slug, p.slug, m.slug, r.slug, g.cls, g.pool_id, m.r_wt_per_s, m.w_out, m.w_cached,
       c.may_borrow, c.counts_as_sold, {starts}, {ends}, g.first, g.cu_sum, g.borrow_sum,
       g.prompt, g.output, g.p95, g.conc, g.ttft, g.tpot, g.lend_sum, g.lend_limited, g.withheld, g.weight_sum
FROM (
    SELECT e.tenant_id, e.project_id, e.model_id, e.region_id, e.traffic_class AS cls, e.pool_id,
           e.starts_at, e.ends_at, MIN(e.id) AS first,
           CAST(SUM(e.cu) AS DOUBLE PRECISION) AS cu_sum,
           CAST(SUM(CASE WHEN e.overage = 'borrow' THEN e.borrowing_limit_cu ELSE 0 END) AS DOUBLE PRECISION)
               AS borrow_sum,
           MAX(e.max_prompt_tokens) AS prompt, MAX(e.max_output_tokens) AS output, MAX(e.output_p95) AS p95,
           SUM(e.max_concurrency) AS conc, MAX(e.ttft_p99_ms) AS ttft, MAX(e.tpot_p99_ms) AS tpot,
           CAST(SUM(COALESCE(e.lending_limit_cu, e.cu)) AS DOUBLE PRECISION) AS lend_sum,
           SUM(CASE WHEN e.lending_limit_cu IS NULL THEN 0 ELSE 1 END) AS lend_limited,
           CAST(SUM(CASE WHEN e.lending_limit_cu IS NULL THEN 0 ELSE e.cu - e.lending_limit_cu END)
               AS DOUBLE PRECISION) AS withheld,
           CAST(SUM(COALESCE(e.weight, 1.0)) AS DOUBLE PRECISION) AS weight_sum
    FROM entitlements_entitlement e
    WHERE e.revoked_at IS NULL AND (e.ends_at IS NULL OR e.ends_at > %s)
    GROUP BY e.tenant_id, e.project_id, e.model_id, e.region_id, e.traffic_class, e.pool_id, e.starts_at, e.ends_at
) g
JOIN entitlements_tenant t ON t.id = g.tenant_id
LEFT JOIN entitlements_project p ON p.id = g.project_id
JOIN entitlements_servedmodel m ON m.id = g.model_id
JOIN entitlements_region r ON r.id = g.region_id
JOIN entitlements_trafficclass c ON c.slug = g.cls
"""
EPOCH = {"postgresql": "EXTRACT(EPOCH FROM {})::float8", "sqlite": "((julianday({}) - 2440587.5) * 86400.0)"}


@dataclass(frozen=True)
class Sums:
    """What one read holds: the groups, the uuids of their lowest pks, the live rows with limits."""

    groups: list[tuple[Any, ...]]
    uuids: dict[int, str]
    limits: list[tuple[Any, ...]]  # (pk, key, starts, ends, *LIMIT_FIELDS) by pk


def read(t: datetime) -> Sums:
    """Every entitlement not revoked and not ended at t (as entitlement_rows), in two queries."""
    epoch = EPOCH[connection.vendor]
    sql = SQL.format(starts=epoch.format("g.starts_at"), ends=epoch.format("g.ends_at"))
    with connection.cursor() as cur:
        cur.execute(sql, [connection.ops.adapt_datetimefield_value(t)])
        groups = cur.fetchall()
    firsts = [g[13] for g in groups]
    rows = (
        Entitlement.objects.filter(revoked_at__isnull=True)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        .filter(Q(pk__in=firsts) | HAS_LIMITS)
        .annotate(uuid_s=TextCast("uuid", TextField()), limited=Case(When(HAS_LIMITS, then=Value(1)), default=Value(0)))
        .annotate(starts=Epoch("starts_at"), ends=Epoch("ends_at"))
        .order_by("pk")
        .values_list(
            "pk",
            "uuid_s",
            "limited",
            "tenant__slug",
            "project__slug",
            "model__slug",
            "region__slug",
            "traffic_class_id",
            "starts",
            "ends",
            *LIMIT_FIELDS,
        )  # fmt: skip
    )
    uuids: dict[int, str] = {}
    limits: list[tuple[Any, ...]] = []
    for pk, uuid_s, limited, tenant, project, model, region, cls, starts, ends, *lim in rows:
        uuids[pk] = uuid_s
        if limited:
            limits.append((pk, (tenant, project or "", model, region, cls), starts, ends, *lim))
    return Sums(groups, uuids, limits)


def derive(
    sums: Sums, t: float
) -> tuple[dict[Key, ScopeParams], dict[int, float], dict[int, float], float | None, dict[int, float]]:
    """At epoch second t: (scopes, reserved wt/s per pool, sold CU per pool, the next start or end,
    wt/s lenders keep back from borrowers per pool: issue 36.3)."""
    acc: dict[Key, list[Any]] = {}
    reserved: dict[int, float] = {}
    sold: dict[int, float] = {}
    withheld: dict[int, float] = {}
    nxt: float | None = None
    for g in sums.groups:
        (tenant, project, model, region, cls, pool, r, w_out, w_cached, may_borrow, counts_sold, starts, ends,
         first, cu, borrow, prompt, output, p95, conc, ttft, tpot, lend, limited, kept, weight) = g  # fmt: skip
        if starts > t:
            nxt = starts if nxt is None or starts < nxt else nxt
            continue
        if ends is not None:
            if ends <= t:
                continue
            nxt = ends if nxt is None or ends < nxt else nxt
        if cls == "reserved":
            reserved[pool] = reserved.get(pool, 0.0) + cu * r
        if counts_sold:
            sold[pool] = sold.get(pool, 0.0) + cu
        if limited:
            withheld[pool] = withheld.get(pool, 0.0) + kept * r
        key = (tenant, project or "", model, region, cls)
        rate, borrow_rate = cu * r, (borrow * r if may_borrow else 0.0)
        a = acc.get(key)
        if a is None:
            acc[key] = [first, rate, borrow_rate, prompt, output, p95, conc, ttft, tpot, w_out, w_cached, pool,
                        lend, bool(limited), weight]  # fmt: skip
            continue
        if first < a[0]:  # the scope is named by its lowest pk, whichever pool that one is on
            a[0], a[11] = first, pool
        a[1] += rate
        a[2] += borrow_rate
        a[3], a[4], a[5] = max(a[3], prompt), max(a[4], output), max(a[5], p95)
        a[6] += conc
        a[7], a[8] = max(a[7], ttft), max(a[8], tpot)
        a[12] += lend
        a[13] = a[13] or bool(limited)
        a[14] += weight
    lims: dict[Key, LimitSpec | None] = {}
    for _, key, starts, ends, *lim in sums.limits:
        if starts <= t and (ends is None or ends > t):
            lims[key] = budgets.combine(lims.get(key), budgets.spec_of(dict(zip(LIMIT_FIELDS, lim, strict=True))))
    scopes = {
        k: ScopeParams(
            ":".join(k),
            str(UUID(sums.uuids[a[0]])),
            k[4],
            a[1],
            a[2],
            a[3],
            a[4],
            a[5],
            a[6],
            a[7],
            a[8],
            a[9],
            a[10],
            a[11],
            lims.get(k),
            a[12] if a[13] else None,
            a[14],
        )  # fmt: skip
        for k, a in acc.items()
    }
    return scopes, reserved, sold, nxt, withheld
