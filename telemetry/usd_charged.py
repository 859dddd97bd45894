"""What a tenant's (or project's) $ budget has been charged this month, from the rollups (issue 51.3):
settled weighted tokens × the $ per weighted token of the pool serving the scope's model and region
(entitlements.cu_hour_rate.usd_per_wt, the figure admission charges). The alerts read this: it lags
the store by the reservations in flight and by rollup delay, as telemetry.budgets does for the
period budgets, and it runs in any process (the in-process store lives in the web tier's only)."""

from __future__ import annotations

from datetime import UTC, datetime

from django.db.models import Q

from entitlements.models import Pool, Project, Tenant
from entitlements.usd_per_token import usd_per_wt
from telemetry.usage import period_sums


def month_bounds(at: datetime) -> tuple[datetime, datetime]:
    start = at.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = start.replace(year=start.year + (start.month == 12), month=start.month % 12 + 1)
    return start, end


def prices() -> dict[tuple[str, str], float]:
    """(model, region) → $ per wt of the first pool (by pk) serving it."""
    out: dict[tuple[str, str], float] = {}
    for pool in Pool.objects.select_related("model", "region", "accelerator", "operating_point").order_by("pk"):
        key = (pool.model.slug, pool.region.slug)
        if key not in out:
            v = usd_per_wt(pool)
            if v is not None:
                out[key] = v
    return out


def month_charged(
    tenant: Tenant, project: Project | None, at: datetime, price: dict[tuple[str, str], float] | None = None
) -> float:
    start, _ = month_bounds(at)
    where = Q(tenant=tenant.slug) & (Q(project=project.slug) if project is not None else Q())
    rows = period_sums(where, start, at, by=("model", "region"), fields=("act",), decision="complete")
    p = prices() if price is None else price
    return sum(float(r["act"] or 0.0) * p.get((r["model"], r["region"]), 0.0) for r in rows)
