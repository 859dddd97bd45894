"""Where and from when a decision grants: the approver's start date and, per region, the pool (the one they
named, checked; else the scope's home, the only pool, or entitlements.pool_choice's rule)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.utils import timezone

from entitlements.models import Pool
from entitlements.pool_choice import headroom_rows
from portal.intake_selectors import default_pool, serving_pools
from portal.models import LaunchRequest
from portal.selectors import window_of


@dataclass
class Placement:
    """Where and from when a decision grants: the approver's start date and a pool per region."""

    start: date
    pools: dict[str, Pool]  # region slug -> the pool the grant goes to


def _parse_start(req: LaunchRequest, raw: Any) -> date:
    if raw in (None, ""):
        return req.launch_date  # type: ignore[return-value]  # required at submission
    try:
        start = raw if isinstance(raw, date) else date.fromisoformat(str(raw))
    except ValueError:
        raise ValidationError({"start_date": "enter a date (YYYY-MM-DD)"})
    if start < timezone.now().date():
        raise ValidationError({"start_date": "cannot be in the past"})
    if req.end_date and start >= req.end_date:
        raise ValidationError({"start_date": f"must be before the request's end date {req.end_date}"})
    return start


def place(req: LaunchRequest, start_date: Any, pools: dict[str, Any] | None, cu: dict[str, Decimal]) -> Placement:
    start = _parse_start(req, start_date)
    chosen: dict[str, Pool] = {}
    errors: dict[str, str] = {}
    for row in req.region_rows.select_related("region"):
        slug = row.region.slug
        if not cu.get(slug):
            continue
        serving, home = serving_pools(req, row.region)
        wanted = (pools or {}).get(slug) or ""
        proposed = req.proposed_pool
        if not wanted and proposed is not None and proposed.region_id == row.region_id:
            wanted = proposed.slug  # filed against it (issue 52): checked like a pool the approver names
        if not wanted:
            if home is not None or len(serving) == 1:
                # default_pool's answer without the headroom it would read: the home pool, or the only pool
                # (the grant checks the headroom under the pools' locks, once).
                chosen[slug] = home or serving[0]
                continue
            rows = [(p, h - cu[slug]) for p, h in headroom_rows(serving, window_of(start, req.end_date))]
            pick = default_pool(req, rows, home, cu[slug])
            if pick is not None:
                chosen[slug] = pick
            continue
        pick = next((p for p in serving if p.slug == wanted), None)
        if pick is None:
            errors[f"pool_{slug}"] = f"pool {wanted} does not serve this model in {slug}"
        elif home is not None and pick.pk != home.pk:
            errors[f"pool_{slug}"] = (
                f"{req.tenant.slug}'s {req.traffic_class} scope in {slug} already lives in pool {home.slug}: "
                f"grants go there (one scope, one pool)"
            )
        else:
            chosen[slug] = pick
    if errors:
        raise ValidationError(errors)
    return Placement(start=start, pools=chosen)
