"""The launch-intake workflow's reads: a request as the actor may see it, what a draft still lacks, the
snapshot an event records, and the pools a decision may grant to. No writes here (portal.services.intake)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.utils import timezone

from capacity.envelope import ENVELOPE_ORDER
from capacity.ordering import ordering_errors, spaced
from entitlements.models import Pool, Region
from entitlements.pool_choice import choose_pool, headroom_rows
from entitlements.services import ENVELOPE_FIELDS, scope_pool_id
from portal.intake_errors import LaunchRequestNotFound
from portal.models import SCENARIOS, LaunchRequest
from portal.selectors import launch_requests_visible_to, window_of

EDITABLE_FIELDS = (
    "title",
    "model",
    "launch_date",
    "end_date",
    "traffic_class",
    *ENVELOPE_FIELDS,
    *[f"{s}_{k}" for s in SCENARIOS for k in ("basis", "value")],
    "target_throttled_share",
    "minute_rate_cv",
    "workload_kind",
    "criticality",
    "justification",
    "proposed_pool",
)


def ref(request: LaunchRequest | UUID | str) -> UUID | str:
    return request.uuid if isinstance(request, LaunchRequest) else request  # type: ignore[return-value]


def launch_request_get(*, actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    try:
        return launch_requests_visible_to(actor).select_related("tenant", "model", "created_by").get(uuid=ref(request))
    except (LaunchRequest.DoesNotExist, ValidationError, ValueError):
        raise LaunchRequestNotFound("no such launch request")


def plain(value: Any) -> Any:
    if isinstance(value, date | Decimal | UUID):
        return str(value)
    if hasattr(value, "slug"):
        return value.slug
    return value


def snapshot(req: LaunchRequest) -> dict[str, Any]:
    data = {name: plain(getattr(req, name)) for name in EDITABLE_FIELDS}
    data["regions"] = sorted(req.region_rows.values_list("region__slug", flat=True))
    return data


def launch_request_missing(req: LaunchRequest) -> dict[str, str]:
    """What a draft still lacks before it can be submitted, by field."""
    errors: dict[str, str] = {}
    for name in ("title", "model", "launch_date", "justification"):
        if not getattr(req, name):
            errors[name] = "required before submitting"
    regions = list(Region.objects.filter(pk__in=req.region_rows.values("region_id")))
    if not regions:
        errors["regions"] = "choose at least one region"
    elif req.model is not None:
        served = set(Pool.objects.filter(model=req.model, region__in=regions).values_list("region__slug", flat=True))
        lacking = sorted(r.slug for r in regions if r.slug not in served)
        if lacking:
            errors["regions"] = f"no pool serves {req.model.slug} in {', '.join(lacking)}"
        proposed = req.proposed_pool
        if proposed is not None and (
            proposed.model_id != req.model.pk or proposed.region_id not in {r.pk for r in regions}
        ):
            errors["proposed_pool"] = (
                f"pool {proposed.slug} does not serve {req.model.slug} in the request's regions "
                f"({', '.join(sorted(r.slug for r in regions))})"
            )
    if req.launch_date and req.launch_date < timezone.now().date():
        errors["launch_date"] = "the launch date has passed"
    if req.launch_date and req.end_date and req.end_date <= req.launch_date:
        errors["end_date"] = "must be after the launch date"
    for name in ENVELOPE_FIELDS:
        if getattr(req, name) is None:
            errors[name] = "required before submitting"
    envelope = {name: getattr(req, name) for name in ENVELOPE_FIELDS}
    for name, message in ordering_errors(envelope, ENVELOPE_ORDER, label=spaced).items():
        errors.setdefault(name, message)
    if req.max_concurrency == 0:
        errors["max_concurrency"] = "must be at least 1"
    longest = (req.max_prompt_tokens or 0) + (req.max_output_tokens or 0)
    if req.model is not None and req.model.context_length and longest > req.model.context_length:
        errors["max_prompt_tokens"] = (
            f"max prompt + max output exceed {req.model.slug}'s context of {req.model.context_length} tokens"
        )
    for s in SCENARIOS:
        if getattr(req, f"{s}_value") is None:
            errors[f"{s}_value"] = "required before submitting"
    if req.committed_value == 0:
        errors["committed_value"] = "the committed scenario must be greater than 0"
    try:  # the ranges (portal.models), for a row stored before they existed
        req.full_clean(exclude=["regions", "state"], validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        for name, msgs in exc.message_dict.items():
            errors.setdefault(name, msgs[0])
    return errors


def serving_pools(req: LaunchRequest, region: Region) -> tuple[list[Pool], Pool | None]:
    """The pools serving the request's model in `region`, and the scope's home pool if it already lives
    in one (one scope one pool: grants must go there)."""
    serving = list(Pool.objects.filter(model=req.model, region=region).order_by("pk"))
    home_pk = scope_pool_id(
        tenant=req.tenant,
        project=None,
        model=req.model,  # type: ignore[arg-type]  # required at submission
        region=region,
        traffic_class=req.traffic_class,
    )
    return serving, next((p for p in serving if p.pk == home_pk), None)


def pool_choices(req: LaunchRequest, region: Region, cu: Decimal, start: date) -> tuple[list[Any], Pool | None]:
    """serving_pools with each pool's headroom after this grant: (pool, headroom after) rows, and the home."""
    serving, home = serving_pools(req, region)
    rows = [(p, headroom - cu) for p, headroom in headroom_rows(serving, window_of(start, req.end_date))]
    return rows, home


def default_pool(req: LaunchRequest, rows: list[Any], home: Pool | None, cu: Decimal) -> Pool | None:
    """The pool an approval grants to when the approver names none: entitlements.pool_choice's one
    rule (the home pool, else the most headroom after the grant, ties to the lowest pk), the rule the
    sizing panel's "would take it" and a plain entitlement_grant follow."""
    choice = choose_pool(
        [(p, after + cu) for p, after in rows],
        cu=cu,
        home_pk=home.pk if home is not None else None,
        counts_as_sold=req.traffic_class != "best_effort",
    )
    return choice.pool if choice is not None else None
