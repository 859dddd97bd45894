"""The "admission" block of `GET /api/v1/entitlements/snapshot` (docs/contract.md §5, issue 20).

What the web tier's serving path enforces, exactly as it derived it (admission.params: scopes
aggregated, pool rates scaled by health, the reclaim margin, the degraded flag) plus the settings
its plans read. A library-mode gateway (admission.library) builds its plans from this block with
the same code (admission.core.build_plan), so both modes decide alike; floats survive JSON as
their shortest repr, so the Lua scripts get the very same arguments. Registered at ready().
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from django.conf import settings

from admission import params, plans

FORMAT = 1


def block(_at: datetime) -> dict[str, Any]:
    snap = params.current()
    scopes = []
    for (tenant, project, model, region, cls), sp in sorted(snap.scopes.items()):
        d = {f.name: getattr(sp, f.name) for f in dataclasses.fields(sp)}
        lim = d.get("limits")
        if lim is not None:
            d["limits"] = dataclasses.asdict(lim)
        if sp.spillover is not None:  # issue 36.1: {target_pool_id, rate, allow, target}
            d["spillover"] = dataclasses.asdict(sp.spillover)
        scopes.append({"scope": [tenant, project, model, region, cls], **d})
    pools = [
        {
            "id": p.pool_id,
            "slug": p.slug,
            "rate": p.rate,
            "depth": p.depth,
            "margin": p.margin,
            "degraded": p.degraded,
            "reserved_floor": p.reserved_floor,
            "lend_rate": p.lend_rate,
        }  # fmt: skip
        for p in sorted(snap.pools.values(), key=lambda p: p.pool_id)
    ]
    return {
        "format": FORMAT,
        "bucket_depth_s": settings.ADMISSION_BUCKET_DEPTH_S,
        "ttl_s": plans.ttl_s(),
        "idem_ttl_s": plans.idem_ttl_s(),
        "placements": sorted([m, r] for m, r in snap.placements),
        "pools": pools,
        "scopes": scopes,
        # issue 51.3: $ budgets and each pool's $ per weighted token (empty: no tenant has a $ budget)
        "usd": {
            "limits": sorted([t, p, v] for (t, p), v in snap.usd.limits.items()),
            "per_wt": {str(k): v for k, v in sorted(snap.usd.per_wt.items())},
        },
    }
