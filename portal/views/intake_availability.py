"""Where the asked CU could be granted, in the launch form and the review (issue 52, docs/contract.md §11).

The live rows follow the live sizing: sizing a request replays 64 simulated draws per scenario, so the rows
take the committed CU the sizing on screen already computed (the `sized_cu` the sizing fragment carries)
instead of sizing again on every keystroke. The figure comes with `sized_for`, a key of the inputs it was
sized from; the rows use it only when the form now posted has the same key, and size it themselves
otherwise (nothing sized yet, or a change the sizing has not caught up with). Trusting a posted CU gives
nothing away: GET /api/v1/availability answers any `cu=`.
"""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from django.db import models
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from entitlements import roles
from entitlements.models import Region, TrafficClass
from portal.availability import Ask, availability
from portal.forms import LaunchRequestForm
from portal.models import LaunchRequest
from portal.selectors import size_request

# What the committed CU is sized from: the form's fields but the ones that only place or name the request,
# and the tenant (its recorded minute-rate CV, portal.selectors.cv_of).
SIZED_FIELDS = (
    "tenant",
    *(n for n in LaunchRequestForm.base_fields if n not in ("regions", "proposed_pool", "title", "justification")),
)


def sized_key(req: LaunchRequest) -> str:
    """A key of the inputs a request's committed CU is sized from: equal keys, equal CU."""

    def value(name: str) -> Any:
        v = getattr(req, name, None)
        return v.pk if isinstance(v, models.Model) else v

    text = json.dumps({n: value(n) for n in SIZED_FIELDS}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _sized_cu(data: Any, req: LaunchRequest) -> Decimal | None:
    """The posted committed CU when it was sized from these very inputs, else None."""
    if data.get("sized_for") != sized_key(req):
        return None
    try:
        cu = Decimal(data.get("sized_cu", ""))
    except InvalidOperation:
        return None
    return cu if cu.is_finite() and cu > 0 else None


def availability_of(req: LaunchRequest, regions: list[Region], committed: Decimal | None) -> dict[str, Any]:
    """The availability rows (portal.availability) for a request's committed CU, regions and window, as the
    edit page's live section and the review show them; `missing` says what the rows still wait for."""
    today = timezone.now().date()
    if req.model is None or req.launch_date is None or not committed:
        return {"missing": "Fill in the model, the launch date and a committed rate to see where capacity is."}
    start = max(req.launch_date, today)
    if req.end_date is not None and req.end_date <= start:
        return {"missing": "The end date has passed: nothing is left of the window to place."}
    ask = Ask(
        model=req.model,
        regions=regions,
        cu=committed,
        start=start,
        until=req.end_date,
        traffic_class=TrafficClass.objects.get(slug=req.traffic_class),
        tenant=req.tenant,
    )
    return {"ask": ask, "rows": availability(ask, today=today), "proposed_pk": req.proposed_pool_id}


def live_rows(request: HttpRequest) -> HttpResponse:
    """The edit page's live availability: what is on screen (saved or not), like the live sizing (the view,
    portal.views.intake.availability_rows, checks the asker files requests)."""
    preview = LaunchRequest(tenant=roles.tenant_of(request.user), created_by=request.user)
    form = LaunchRequestForm(request.POST)
    changes = form.valid_changes()
    regions = list(changes.pop("regions", None) or [])
    for name, value in changes.items():
        setattr(preview, name, value)
    committed = _sized_cu(request.POST, preview)
    if committed is None:
        committed = size_request(preview, []).cu.get("committed")
    ctx = {"availability": availability_of(preview, regions, committed), "live": True}
    return render(request, "portal/intake/_availability.html", ctx)
