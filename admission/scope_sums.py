# ruff: noqa: S608 - SQL built only from this module's constants, never input
"""The snapshot's scopes summed by the database (issue 19.2): one GROUP BY per read, so Python loops
over groups (hundreds), not entitlements (10,000s), and the rows never cross the wire.

Rows are grouped by scope, pool and window (starts, ends): a scope can span pools (reserved and sold
are per row's pool), and a group starts and ends as one row would, so when a window starts or ends
the held groups are derived again without a query. Entitlements sold together share a window, so
groups are far fewer than rows. `read(t, scopes)` re-sums only the given scopes (issue 35.2: the
incremental refresh after a write). admission.scope_table.derive gives the same result as
the row-by-row specification (tests/admission/scope_spec.py, tested equal on a varied fixture): rates and
borrowing add up, the envelope is the widest, concurrency adds up, the scope names its lowest-pk
entitlement, budgets combine in pk order (the few rows with limits are held as rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from django.db import connection
from django.db.models import Q

from admission.snapshot_reads import Epoch
from entitlements.models import Entitlement

Key = tuple[str, str, str, str, str]
IdKey = tuple[int, int | None, int, int, str]  # the scope by ids: (tenant, project, model, region, class)
LIMIT_FIELDS = ("daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst")
HAS_LIMITS = Q(daily_budget__isnull=False) | Q(monthly_budget__isnull=False) | Q(max_rps__isnull=False)

# Aggregated on the entitlement table alone, by ids and window (sorted or hashed on integers and
# timestamps), then joined to the slugs and catalogue columns for the groups only: grouping by the
# joined text slugs cost a collation-aware sort of every row. {epoch} is the backend's timestamp →
# epoch seconds, as admission.snapshot_reads.Epoch; the group's lowest-pk row gives its uuid (a
# join, not a `pk__in` of every group's first row). {scopes}: "" or the scopes a refresh re-sums.
SQL = """
SELECT t.slug, p.slug, m.slug, r.slug, g.cls, g.pool_id, m.r_wt_per_s, m.w_out, m.w_cached,
       c.may_borrow, c.counts_as_sold, {starts}, {ends}, g.first, g.cu_sum, g.borrow_sum,
       g.prompt, g.output, g.p95, g.conc, g.ttft, g.tpot, g.lend_sum, g.lend_limited, g.withheld, g.weight_sum,
       g.tenant_id, g.project_id, g.model_id, g.region_id, {uuid}
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
    WHERE e.revoked_at IS NULL AND (e.ends_at IS NULL OR e.ends_at > %s){scopes}
    GROUP BY e.tenant_id, e.project_id, e.model_id, e.region_id, e.traffic_class, e.pool_id, e.starts_at, e.ends_at
) g
JOIN entitlements_entitlement f ON f.id = g.first
JOIN entitlements_tenant t ON t.id = g.tenant_id
LEFT JOIN entitlements_project p ON p.id = g.project_id
JOIN entitlements_servedmodel m ON m.id = g.model_id
JOIN entitlements_region r ON r.id = g.region_id
JOIN entitlements_trafficclass c ON c.slug = g.cls
"""
EPOCH = {"postgresql": "EXTRACT(EPOCH FROM {})::float8", "sqlite": "((julianday({}) - 2440587.5) * 86400.0)"}
UUID_TEXT = {"postgresql": "CAST(f.uuid AS TEXT)", "sqlite": "f.uuid"}
SCOPE_SQL = "(e.tenant_id = %s AND e.project_id {} AND e.model_id = %s AND e.region_id = %s AND e.traffic_class = %s)"
# A group row's columns, by index (admission.scope_table reads them in its per-scope loop).
(G_TENANT, G_PROJECT, G_MODEL, G_REGION, G_CLS, G_POOL, G_R, G_W_OUT, G_W_CACHED, G_MAY_BORROW, G_SOLD, G_STARTS,
 G_ENDS, G_FIRST, G_CU, G_BORROW, G_PROMPT, G_OUTPUT, G_P95, G_CONC, G_TTFT, G_TPOT, G_LEND, G_LIMITED, G_KEPT,
 G_WEIGHT, G_TENANT_ID, G_PROJECT_ID, G_MODEL_ID, G_REGION_ID, G_UUID) = range(31)  # fmt: skip


@dataclass(frozen=True)
class Sums:
    """What one read holds: the groups, the uuids of their lowest pks, the live rows with limits."""

    groups: list[tuple[Any, ...]]
    uuids: dict[int, str]
    limits: list[tuple[Any, ...]]  # (pk, IdKey, starts, ends, *LIMIT_FIELDS) by pk


def id_key(g: tuple[Any, ...]) -> IdKey:
    return (g[G_TENANT_ID], g[G_PROJECT_ID], g[G_MODEL_ID], g[G_REGION_ID], g[G_CLS])


def _scope_filter(scopes: list[IdKey] | None) -> tuple[str, list[Any], Q]:
    """The WHERE fragment (SQL, its parameters) and the ORM filter restricting a read to `scopes`."""
    if scopes is None:
        return "", [], Q()
    sql: list[str] = []
    args: list[Any] = []
    q = Q(pk__in=[])  # matches nothing: the OR below adds each scope
    for tenant, project, model, region, cls in scopes:
        sql.append(SCOPE_SQL.format("IS NULL" if project is None else "= %s"))
        args += [tenant, model, region, cls] if project is None else [tenant, project, model, region, cls]
        q |= Q(tenant_id=tenant, project_id=project, model_id=model, region_id=region, traffic_class_id=cls)
    return " AND (" + " OR ".join(sql) + ")", args, q


def read(t: datetime, scopes: list[IdKey] | None = None) -> Sums:
    """Every entitlement not revoked and not ended at t (as entitlement_rows), in two queries; with
    `scopes`, only theirs (an incremental refresh: a handful of scopes, never thousands)."""
    if scopes is not None and not scopes:
        return Sums([], {}, [])
    vendor = connection.vendor
    where, args, q = _scope_filter(scopes)
    sql = SQL.format(
        starts=EPOCH[vendor].format("g.starts_at"), ends=EPOCH[vendor].format("g.ends_at"), uuid=UUID_TEXT[vendor],
        scopes=where,
    )  # fmt: skip
    with connection.cursor() as cur:
        cur.execute(sql, [connection.ops.adapt_datetimefield_value(t), *args])
        groups = cur.fetchall()
    rows = (
        Entitlement.objects.filter(revoked_at__isnull=True)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=t))
        .filter(HAS_LIMITS)
        .filter(q)
        .annotate(starts=Epoch("starts_at"), ends=Epoch("ends_at"))
        .order_by("pk")
        .values_list(
            "pk",
            "tenant_id",
            "project_id",
            "model_id",
            "region_id",
            "traffic_class_id",
            "starts",
            "ends",
            *LIMIT_FIELDS,
        )  # fmt: skip
    )
    limits = [(pk, (tn, pj, md, rg, cls), starts, ends, *lim) for pk, tn, pj, md, rg, cls, starts, ends, *lim in rows]
    return Sums(groups, {g[G_FIRST]: g[G_UUID] for g in groups}, limits)


def canonical_uuid(u: str) -> str:
    """str(uuid.UUID(u)) for what the databases hand back (PostgreSQL: canonical already; SQLite: 32
    lower-case hex digits), without building a UUID object per scope."""
    if len(u) == 36:
        return u
    if len(u) == 32:
        return f"{u[:8]}-{u[8:12]}-{u[12:16]}-{u[16:20]}-{u[20:]}"
    return str(UUID(u))
