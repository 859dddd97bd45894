"""The launch-intake workflow. Every step: find the request as the actor may see it (else 404),
check the actor may take this step (else 403), lock the row and check the state (else 409),
validate input (else 400), move the state, write the event, schedule the emails on commit.

Errors map to HTTP in the views: LaunchRequestNotFound 404, LaunchRequestForbidden 403,
LaunchRequestConflict 409 (HeadroomGone included), django ValidationError 400.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from decimal import Decimal, InvalidOperation
from functools import partial
from typing import Any
from uuid import UUID

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_fsm import ConcurrentTransition, TransitionNotAllowed, can_proceed

from capacity.envelope import ENVELOPE_ORDER
from capacity.ordering import ordering_errors, spaced
from entitlements import roles
from entitlements.models import Pool, Region
from entitlements.pool_choice import choose_pool, headroom_rows
from entitlements.services import (
    ENVELOPE_FIELDS,
    Envelope,
    OversellError,
    ScopePoolConflict,
    entitlement_grant,
    scope_pool_id,
)
from portal.models import SCENARIOS, LaunchRequest, LaunchRequestEvent, LaunchRequestRegion, State
from portal.selectors import launch_requests_visible_to, size_request, window_of
from portal.services.notify import launch_request_notify


class LaunchRequestNotFound(Exception):
    """Not there, or not visible to this person (another tenant's request looks the same)."""


class LaunchRequestForbidden(PermissionDenied):
    pass


class LaunchRequestConflict(Exception):
    """The step is not allowed from the request's current state (or the state moved under us)."""


class HeadroomGone(LaunchRequestConflict):
    """Approval would oversell a pool: headroom was taken after the request was sized."""


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
    "criticality",
    "justification",
)


def _ref(request: LaunchRequest | UUID | str) -> UUID | str:
    return request.uuid if isinstance(request, LaunchRequest) else request  # type: ignore[return-value]


def launch_request_get(*, actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    try:
        return launch_requests_visible_to(actor).select_related("tenant", "model", "created_by").get(uuid=_ref(request))
    except (LaunchRequest.DoesNotExist, ValidationError, ValueError):
        raise LaunchRequestNotFound("no such launch request")


def _lock(actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    """Row lock on the request: two approvers deciding at once queue here, the second sees the new state."""
    try:
        return launch_requests_visible_to(actor).select_for_update().get(uuid=_ref(request))
    except (LaunchRequest.DoesNotExist, ValidationError, ValueError):
        raise LaunchRequestNotFound("no such launch request")


def _permission_of(method_name: str) -> Any:
    # The permission declared on the model's @transition: one rule, used by django-fsm and here.
    meta = getattr(LaunchRequest, method_name)._django_fsm
    return next(iter(meta.transitions.values())).permission


def _forbid_message(req: LaunchRequest, actor: Any, step: str) -> str:
    r = roles.roles_of(actor)
    if roles.APPROVER in r and req.created_by_id == actor.pk and step != "requester":
        return "you filed this request; another approver must decide it"
    if step == "requester":
        return f"only requesters of {req.tenant.slug} can do this"
    return "only approvers decide launch requests"


def _check_may(req: LaunchRequest, actor: Any, method_name: str) -> None:
    if not _permission_of(method_name)(req, actor):
        step = "requester" if method_name in ("submit", "withdraw", "reopen") else "approver"
        raise LaunchRequestForbidden(_forbid_message(req, actor, step))


def _check_state(req: LaunchRequest, method_name: str, step: str) -> None:
    # Conditions are checked by the transition itself, after the input has been validated.
    if not can_proceed(getattr(req, method_name), check_conditions=False):
        raise LaunchRequestConflict(f"cannot {step} a request that is {req.get_state_display().lower()}")


def _move(req: LaunchRequest, method_name: str) -> None:
    try:
        getattr(req, method_name)()
    except TransitionNotAllowed as exc:
        raise LaunchRequestConflict(f"cannot {method_name.replace('_', ' ')} this request now: {exc}")


def _save(req: LaunchRequest) -> None:
    try:
        req.save()
    except ConcurrentTransition:
        raise LaunchRequestConflict("the request changed while you were deciding; reload it")


def _event(
    req: LaunchRequest, actor: Any, transition: str, before: str, comment: str = "", changes: dict | None = None
) -> LaunchRequestEvent:
    ev = LaunchRequestEvent.objects.create(
        request=req,
        actor=actor,
        transition=transition,
        comment=comment,
        from_state=before,
        to_state=req.state,
        changes={"state": [before, req.state], **(changes or {})},
    )
    transaction.on_commit(partial(launch_request_notify, ev.pk))
    return ev


def _plain(value: Any) -> Any:
    if isinstance(value, date | Decimal | UUID):
        return str(value)
    if hasattr(value, "slug"):
        return value.slug
    return value


def snapshot(req: LaunchRequest) -> dict[str, Any]:
    data = {name: _plain(getattr(req, name)) for name in EDITABLE_FIELDS}
    data["regions"] = sorted(req.region_rows.values_list("region__slug", flat=True))
    return data


# --- filing and editing ---------------------------------------------------------------------


def _apply(req: LaunchRequest, changes: dict[str, Any]) -> dict[str, list[Any]]:
    unknown = set(changes) - set(EDITABLE_FIELDS) - {"regions"}
    if unknown:
        raise ValidationError({sorted(unknown)[0]: "not a field of a launch request"})
    diff: dict[str, list[Any]] = {}
    for name, value in changes.items():
        if name == "regions":
            continue
        before = getattr(req, name)
        if before != value:
            diff[name] = [_plain(before), _plain(value)]
            setattr(req, name, value)
    # Only a date being set now must be ahead: a stored one that has passed stays editable around it.
    if "launch_date" in diff and req.launch_date and req.launch_date < timezone.now().date():
        raise ValidationError({"launch_date": "the launch date has passed"})
    return diff


def _set_regions(req: LaunchRequest, regions: list[Region]) -> list[str] | None:
    current = set(req.region_rows.values_list("region_id", flat=True))
    wanted = {r.pk for r in regions}
    if current == wanted:
        return None
    req.region_rows.exclude(region_id__in=wanted).delete()
    LaunchRequestRegion.objects.bulk_create(
        [LaunchRequestRegion(request=req, region_id=pk) for pk in sorted(wanted - current)]
    )
    return sorted(r.slug for r in regions)


@transaction.atomic
def launch_request_create(*, actor: Any, uuid: UUID | None = None, **changes: Any) -> LaunchRequest:
    """`uuid`: the key the unsaved form was given (GET /launch/new), so a repeated first save of one
    page finds the draft it made (launch_request_create_or_update) instead of filing a second."""
    tenant = roles.tenant_of(actor)
    if roles.REQUESTER not in roles.roles_of(actor) or tenant is None:
        raise LaunchRequestForbidden("only a tenant's requesters file launch requests")
    req = LaunchRequest(tenant=tenant, created_by=actor)
    if uuid is not None:
        req.uuid = uuid
    _apply(req, {k: v for k, v in changes.items() if k != "regions"})
    req.full_clean(exclude=["regions", "state"])
    req.save()
    if changes.get("regions"):
        _set_regions(req, changes["regions"])
    _event(req, actor, "create", "", changes={"filed": snapshot(req)})
    return req


def launch_request_create_or_update(*, actor: Any, uuid: UUID, **changes: Any) -> tuple[LaunchRequest, bool]:
    """The new-request page's saves: the first creates the draft under the page's key, later ones
    (or one that raced it) update that draft. Returns (request, created)."""
    if LaunchRequest.objects.filter(uuid=uuid).exists():
        return launch_request_update(actor=actor, request=uuid, **changes), False
    try:
        return launch_request_create(actor=actor, uuid=uuid, **changes), True
    except IntegrityError:  # the other save of the same page won the insert
        return launch_request_update(actor=actor, request=uuid, **changes), False


@transaction.atomic
def launch_request_update(*, actor: Any, request: LaunchRequest | UUID | str, **changes: Any) -> LaunchRequest:
    """Save draft fields (autosave calls this with the fields that validated). A returned
    request goes back to draft on its first edit, recorded as a `reopen` event."""
    req = _lock(actor, request)
    _check_may(req, actor, "withdraw")  # the same people who file may edit
    if not req.is_editable:
        raise LaunchRequestConflict(f"a {req.get_state_display().lower()} request cannot be edited")
    if req.state == State.RETURNED:
        before = req.state
        _move(req, "reopen")
        _save(req)
        _event(req, actor, "reopen", before)
    diff = _apply(req, changes)
    if diff:
        req.full_clean(exclude=["regions", "state"])
        _save(req)
    if "regions" in changes:
        _set_regions(req, list(changes["regions"]))
    return req


# --- submission ------------------------------------------------------------------------------


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


@transaction.atomic
def launch_request_submit(*, actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    req = _lock(actor, request)
    _check_may(req, actor, "submit")
    _check_state(req, "submit", "submit")
    missing = launch_request_missing(req)
    if missing:
        raise ValidationError(missing)
    before = req.state
    _move(req, "submit")
    req.submitted_at = timezone.now()
    _save(req)
    _event(req, actor, "submit", before, changes={"submitted": snapshot(req)})
    return req


@transaction.atomic
def launch_request_withdraw(*, actor: Any, request: LaunchRequest | UUID | str, comment: str = "") -> LaunchRequest:
    req = _lock(actor, request)
    _check_may(req, actor, "withdraw")
    _check_state(req, "withdraw", "withdraw")
    before = req.state
    _move(req, "withdraw")
    _save(req)
    _event(req, actor, "withdraw", before, comment)
    return req


@transaction.atomic
def launch_request_delete(*, actor: Any, request: LaunchRequest | UUID | str) -> None:
    """A draft its author no longer wants: gone with its regions and events (issue 22). Only the author,
    only while a draft that was never submitted (a returned request has a review history to keep)."""
    req = _lock(actor, request)
    if req.created_by_id != getattr(actor, "pk", None):
        raise LaunchRequestForbidden("only the person who started a draft deletes it")
    if req.state != State.DRAFT or req.events.filter(transition="submit").exists():
        raise LaunchRequestConflict(f"only a draft that was never submitted can be deleted (this one is {req.state})")
    req.delete()


# --- decisions -------------------------------------------------------------------------------


def _decide(req: LaunchRequest, actor: Any, comment: str) -> None:
    req.decided_by = actor
    req.decided_at = timezone.now()
    req.decision_comment = comment


def _require_comment(comment: str, why: str) -> str:
    comment = (comment or "").strip()
    if not comment:
        raise ValidationError({"comment": f"required: {why}"})
    return comment


def _envelope(req: LaunchRequest) -> Envelope:
    return Envelope(**{name: getattr(req, name) for name in ENVELOPE_FIELDS})


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


def _placement(req: LaunchRequest, start_date: Any, pools: dict[str, Any] | None, cu: dict[str, Decimal]) -> Placement:
    start = _parse_start(req, start_date)
    chosen: dict[str, Pool] = {}
    errors: dict[str, str] = {}
    for row in req.region_rows.select_related("region"):
        slug = row.region.slug
        if not cu.get(slug):
            continue
        serving, home = serving_pools(req, row.region)
        wanted = (pools or {}).get(slug) or ""
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


def _grant(
    req: LaunchRequest, actor: Any, row: LaunchRequestRegion, cu: Decimal, placement: Placement
) -> dict[str, Any]:
    window = window_of(placement.start, req.end_date)
    try:
        ent = entitlement_grant(
            actor=actor,
            reason=f"launch request {req.uuid}: {req.title}",
            tenant=req.tenant,
            model=req.model,  # type: ignore[arg-type]  # required at submission
            region=row.region,
            traffic_class=req.traffic_class,
            cu=cu,
            starts_at=window.start,
            ends_at=window.end,
            envelope=_envelope(req),
            pool=placement.pools.get(row.region.slug),
        )
    except ScopePoolConflict as exc:
        raise ValidationError({f"pool_{row.region.slug}": "; ".join(exc.messages)})
    except OversellError as exc:
        detail = "; ".join(exc.messages)
        raise HeadroomGone(f"not enough headroom in {row.region.slug} any more: {detail}. Nothing was granted.")
    row.approved_cu = ent.cu
    row.entitlement = ent
    row.save(update_fields=["approved_cu", "entitlement"])
    return {"approved_cu": str(ent.cu), "pool": ent.pool.slug, "entitlement": str(ent.uuid)}


def _committed_cu(req: LaunchRequest) -> Decimal:
    committed = size_request(req, []).cu["committed"]
    if committed is None or committed <= 0:
        raise ValidationError({"committed_value": "the committed scenario gives no capacity to grant"})
    return committed


@transaction.atomic
def launch_request_approve(
    *,
    actor: Any,
    request: LaunchRequest | UUID | str,
    comment: str = "",
    start_date: Any = None,
    pools: dict[str, Any] | None = None,
) -> LaunchRequest:
    """Grant the committed CU in every region, all or nothing: one OversellError rolls back every
    grant and leaves the request submitted. `start_date` (default the launch date) and `pools`
    (region slug -> pool slug, default per region: default_pool) are the approver's choices."""
    req = _lock(actor, request)
    _check_may(req, actor, "approve")
    _check_state(req, "approve", "approve")
    cu = _committed_cu(req)
    rows = list(req.region_rows.select_related("region"))
    placement = _placement(req, start_date, pools, {row.region.slug: cu for row in rows})
    granted = {row.region.slug: _grant(req, actor, row, cu, placement) for row in rows}
    before = req.state
    _move(req, "approve")
    _decide(req, actor, comment)
    _save(req)
    _event(req, actor, "approve", before, comment, {"regions": granted})
    return req


def _parse_region_cu(req: LaunchRequest, region_cu: dict[str, Any], committed: Decimal) -> dict[str, Decimal]:
    rows = {row.region.slug: row for row in req.region_rows.select_related("region")}
    errors: dict[str, str] = {}
    parsed: dict[str, Decimal] = {}
    unknown = sorted(set(region_cu) - set(rows))
    for slug in unknown:
        errors[f"regions.{slug}"] = "not a region of this request"
    for slug in rows:
        raw = region_cu.get(slug)
        if raw is None or raw == "":
            errors[f"regions.{slug}"] = "enter the CU to approve here (0 for none)"
            continue
        try:
            value = Decimal(str(raw)).quantize(Decimal("0.001"))
        except (InvalidOperation, ValueError):
            errors[f"regions.{slug}"] = "enter a number of CU"
            continue
        if value < 0:
            errors[f"regions.{slug}"] = "cannot be negative"
        elif value > committed:
            errors[f"regions.{slug}"] = f"more than the {committed} CU requested"
        else:
            parsed[slug] = value
    if not errors and not any(parsed.values()):
        errors["regions"] = "approve some CU in at least one region, or reject the request"
    if errors:
        raise ValidationError(errors)
    return parsed


@transaction.atomic
def launch_request_partially_approve(
    *,
    actor: Any,
    request: LaunchRequest | UUID | str,
    region_cu: dict[str, Any],
    comment: str,
    start_date: Any = None,
    pools: dict[str, Any] | None = None,
) -> LaunchRequest:
    """Per region an approver-chosen CU (0 = nothing there); every grant still checks headroom."""
    req = _lock(actor, request)
    _check_may(req, actor, "partially_approve")
    _check_state(req, "partially_approve", "partially approve")
    comment = _require_comment(comment, "say why only part is approved")
    amounts = _parse_region_cu(req, region_cu, _committed_cu(req))
    placement = _placement(req, start_date, pools, amounts)
    granted: dict[str, Any] = {}
    for row in req.region_rows.select_related("region"):
        cu = amounts[row.region.slug]
        if cu > 0:
            granted[row.region.slug] = _grant(req, actor, row, cu, placement)
        else:
            row.approved_cu = Decimal(0)
            row.save(update_fields=["approved_cu"])
            granted[row.region.slug] = {"approved_cu": "0.000"}
    before = req.state
    _move(req, "partially_approve")
    _decide(req, actor, comment)
    _save(req)
    _event(req, actor, "partially_approve", before, comment, {"regions": granted})
    return req


def _decide_with_comment(
    actor: Any, request: LaunchRequest | UUID | str, *, method: str, step: str, comment: str, why: str
) -> LaunchRequest:
    """Reject and return: an approver's decision that needs a comment and creates nothing."""
    req = _lock(actor, request)
    _check_may(req, actor, method)
    _check_state(req, method, step)
    comment = _require_comment(comment, why)
    before = req.state
    _move(req, method)
    _decide(req, actor, comment)
    _save(req)
    _event(req, actor, step, before, comment)
    return req


@transaction.atomic
def launch_request_reject(*, actor: Any, request: LaunchRequest | UUID | str, comment: str) -> LaunchRequest:
    return _decide_with_comment(
        actor, request, method="reject", step="reject", comment=comment, why="say why the request is rejected"
    )


@transaction.atomic
def launch_request_return(*, actor: Any, request: LaunchRequest | UUID | str, comment: str) -> LaunchRequest:
    return _decide_with_comment(
        actor,
        request,
        method="return_to_requester",
        step="return",
        comment=comment,
        why="say what the requester should change",
    )
