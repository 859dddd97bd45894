"""Filing, editing, submitting, withdrawing and deleting a launch request: the requester's side."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from entitlements import roles
from entitlements.models import Region
from portal.intake_errors import LaunchRequestConflict, LaunchRequestForbidden
from portal.intake_selectors import EDITABLE_FIELDS, launch_request_missing, plain, snapshot
from portal.models import LaunchRequest, LaunchRequestRegion, State
from portal.services.intake import steps


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
            diff[name] = [plain(before), plain(value)]
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
    steps.event(req, actor, "create", "", changes={"filed": snapshot(req)})
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
    req = steps.lock(actor, request)
    steps.check_may(req, actor, "withdraw")  # the same people who file may edit
    if not req.is_editable:
        raise LaunchRequestConflict(f"a {req.get_state_display().lower()} request cannot be edited")
    if req.state == State.RETURNED:
        before = req.state
        steps.move(req, "reopen")
        steps.save(req)
        steps.event(req, actor, "reopen", before)
    diff = _apply(req, changes)
    if diff:
        req.full_clean(exclude=["regions", "state"])
        steps.save(req)
    if "regions" in changes:
        _set_regions(req, list(changes["regions"]))
    return req


@transaction.atomic
def launch_request_submit(*, actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    req = steps.lock(actor, request)
    steps.check_may(req, actor, "submit")
    steps.check_state(req, "submit", "submit")
    missing = launch_request_missing(req)
    if missing:
        raise ValidationError(missing)
    before = req.state
    steps.move(req, "submit")
    req.submitted_at = timezone.now()
    steps.save(req)
    steps.event(req, actor, "submit", before, changes={"submitted": snapshot(req)})
    return req


@transaction.atomic
def launch_request_withdraw(*, actor: Any, request: LaunchRequest | UUID | str, comment: str = "") -> LaunchRequest:
    req = steps.lock(actor, request)
    steps.check_may(req, actor, "withdraw")
    steps.check_state(req, "withdraw", "withdraw")
    before = req.state
    steps.move(req, "withdraw")
    steps.save(req)
    steps.event(req, actor, "withdraw", before, comment)
    return req


@transaction.atomic
def launch_request_delete(*, actor: Any, request: LaunchRequest | UUID | str) -> None:
    """A draft its author no longer wants: gone with its regions and events (issue 22). Only the author,
    only while a draft that was never submitted (a returned request has a review history to keep)."""
    req = steps.lock(actor, request)
    if req.created_by_id != getattr(actor, "pk", None):
        raise LaunchRequestForbidden("only the person who started a draft deletes it")
    if req.state != State.DRAFT or req.events.filter(transition="submit").exists():
        raise LaunchRequestConflict(f"only a draft that was never submitted can be deleted (this one is {req.state})")
    req.delete()
