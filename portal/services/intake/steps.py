"""The steps every launch-intake write takes: lock the request as the actor may see it (else 404), check the
actor may take this step (else 403) and the state allows it (else 409), move the state, save, write the event
and schedule its emails on commit. The writes themselves: drafts.py (filing, editing, submitting) and
decisions.py (approving, rejecting, returning)."""

from __future__ import annotations

from functools import partial
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import transaction
from django_fsm import ConcurrentTransition, TransitionNotAllowed, can_proceed

from entitlements import roles
from portal.intake_errors import LaunchRequestConflict, LaunchRequestForbidden, LaunchRequestNotFound
from portal.intake_selectors import ref
from portal.models import LaunchRequest, LaunchRequestEvent
from portal.selectors import launch_requests_visible_to
from portal.services.notify import launch_request_notify


def lock(actor: Any, request: LaunchRequest | UUID | str) -> LaunchRequest:
    """Row lock on the request: two approvers deciding at once queue here, the second sees the new state."""
    try:
        return launch_requests_visible_to(actor).select_for_update().get(uuid=ref(request))
    except (LaunchRequest.DoesNotExist, ValidationError, ValueError):
        raise LaunchRequestNotFound("no such launch request")


def permission_of(method_name: str) -> Any:
    # The permission declared on the model's @transition: one rule, used by django-fsm and here.
    meta = getattr(LaunchRequest, method_name)._django_fsm
    return next(iter(meta.transitions.values())).permission


def forbid_message(req: LaunchRequest, actor: Any, step: str) -> str:
    r = roles.roles_of(actor)
    if roles.APPROVER in r and req.created_by_id == actor.pk and step != "requester":
        return "you filed this request; another approver must decide it"
    if step == "requester":
        return f"only requesters of {req.tenant.slug} can do this"
    return "only approvers decide launch requests"


def check_may(req: LaunchRequest, actor: Any, method_name: str) -> None:
    if not permission_of(method_name)(req, actor):
        step = "requester" if method_name in ("submit", "withdraw", "reopen") else "approver"
        raise LaunchRequestForbidden(forbid_message(req, actor, step))


def check_state(req: LaunchRequest, method_name: str, step: str) -> None:
    # Conditions are checked by the transition itself, after the input has been validated.
    if not can_proceed(getattr(req, method_name), check_conditions=False):
        raise LaunchRequestConflict(f"cannot {step} a request that is {req.get_state_display().lower()}")


def move(req: LaunchRequest, method_name: str) -> None:
    try:
        getattr(req, method_name)()
    except TransitionNotAllowed as exc:
        raise LaunchRequestConflict(f"cannot {method_name.replace('_', ' ')} this request now: {exc}")


def save(req: LaunchRequest) -> None:
    try:
        req.save()
    except ConcurrentTransition:
        raise LaunchRequestConflict("the request changed while you were deciding; reload it")


def event(
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
