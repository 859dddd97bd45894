"""Where demand sits: a (tenant, model, region) series goes to the pools holding its entitlements.

Admission serves a scope from the one pool its entitlements live in (docs/contract.md §5, one scope, one
pool), so that pool carries the scope's demand. Demand series are per (tenant, model, region),
which may span scopes (projects, traffic classes) in different pools: the series splits over those
pools by the CU of the entitlements active at the run's end. A series with no active entitlement
is throttled NOT_ENTITLED at the gateway and loads no pool, so it is left unplaced, and says so.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal

from entitlements.models import Entitlement
from entitlements.selectors import active_at

Key = tuple[str, str, str]
UNPLACED = "no active entitlement at the end of the history: not placed in any pool"


def pools_by_series(at: datetime) -> dict[Key, list[tuple[int, float]]]:
    """(tenant, model, region) → [(pool id, share of the series)], shares summing to 1."""
    cu: dict[Key, dict[int, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    rows = active_at(Entitlement.objects.all(), at).values_list(
        "tenant__slug", "model__slug", "region__slug", "pool_id", "cu"
    )
    for tenant, model, region, pool_id, amount in rows:
        cu[(tenant, model, region)][pool_id] += amount
    out = {}
    for key, pools in cu.items():
        total = sum(pools.values())
        # Entitlements of 0 CU (best effort holds no capacity) still say where the scope is served.
        out[key] = [
            (pool_id, float(amount / total) if total > 0 else 1.0 / len(pools))
            for pool_id, amount in sorted(pools.items())
        ]
    return out
