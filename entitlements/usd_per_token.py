"""The $ a scope pays per weighted token (docs/contract.md §10, $ budgets): what admission charges a request
against a tenant's or project's `budget_usd`.

    usd per wt = the pool's fully loaded $ per CU-hour at the entitlement's term ÷ (R wt/s × 3,600 s)

One CU-hour is R × 3,600 weighted tokens (docs/contract.md §1), and the rate is the one the statement and the
charges bill that entitlement at (entitlements.cu_hour_rate with the entitlement's term), so a budget spent
token by token and the month's charges count in the same dollars.
"""

from __future__ import annotations

from typing import Any

from entitlements.cu_hour_rate import pool_cu_hour_rate

SECONDS_PER_HOUR = 3600.0


def usd_per_weighted_token(entitlement: Any) -> float | None:
    """None when the pool cannot be priced (no price-list row and no catalogue price): nothing to charge."""
    return usd_per_wt(entitlement.pool, entitlement.term)


def usd_per_wt(pool: Any, term: str | None = None) -> float | None:
    """$ per weighted token served from `pool` at `term` (None: the pool's own term). The serving path's
    $ budgets (admission.usd_params) price per pool: a scope's entitlements may hold different terms."""
    rate = pool_cu_hour_rate(pool, term).usd_per_cu_hour
    r_wt_per_s = float(pool.model.r_wt_per_s)
    if rate is None or r_wt_per_s <= 0:
        return None
    return rate / (r_wt_per_s * SECONDS_PER_HOUR)
