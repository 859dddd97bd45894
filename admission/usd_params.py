"""The web tier's $ book (admission.usd) from the database: who has a $ budget (tenants and projects)
and each pool's $ per weighted token, from the one $ per CU-hour basis (entitlements.cu_hour_rate:
the statement, the cost page and planning price a CU-hour with it; a CU-hour is R × 3600 weighted
tokens). Read by admission.params with the snapshot's parts: budgets with the entitlements part
(tenant and project rows bump it), prices with the supply part, and only while some budget exists."""

from __future__ import annotations

import logging

from entitlements.models import Pool, Project, Tenant
from entitlements.usd_per_token import usd_per_wt

log = logging.getLogger(__name__)


def read_limits() -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for slug, b in Tenant.objects.filter(budget_usd__isnull=False).values_list("slug", "budget_usd"):
        out[(slug, "")] = float(b or 0.0)
    rows = Project.objects.filter(budget_usd__isnull=False).values_list("tenant__slug", "slug", "budget_usd")
    for tenant, project, b in rows:
        out[(tenant, project)] = float(b or 0.0)
    return out


def read_prices() -> dict[int, float]:
    out: dict[int, float] = {}
    pools = Pool.objects.select_related("model", "accelerator", "operating_point").prefetch_related("zones")
    for pool in pools:
        v = usd_per_wt(pool)
        if v is None:
            log.warning("$ budgets: pool %s has no $ per CU-hour; its traffic is charged $0", pool.slug)
            continue
        out[pool.pk] = v
    return out
