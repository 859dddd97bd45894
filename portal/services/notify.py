"""Emails about launch requests, sent after the transition commits (never for a rolled-back one).

The requester hears about every step; approvers hear when something new waits in their queue.
A mail failure is logged, not raised: the decision has already been recorded.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail

from entitlements.models import PlatformRole

log = logging.getLogger(__name__)

VERBS = {
    "create": "was filed",
    "submit": "was submitted for review",
    "approve": "was approved",
    "partially_approve": "was partially approved",
    "reject": "was rejected",
    "return": "was returned for changes",
    "reopen": "was reopened as a draft",
    "withdraw": "was withdrawn",
}


def _approver_emails() -> list[str]:
    ids = PlatformRole.objects.filter(role=PlatformRole.Role.APPROVER).values("user_id")
    users = get_user_model().objects.filter(pk__in=ids, is_active=True).exclude(email="")
    return sorted(set(users.values_list("email", flat=True)))


def _link(path: str) -> str:
    base = getattr(settings, "HEADROOM_BASE_URL", "")
    return f"{base.rstrip('/')}{path}" if base else path


def launch_request_notify(event_id: int) -> None:
    from portal.models import LaunchRequestEvent  # the model module imports nothing from here

    ev = LaunchRequestEvent.objects.select_related("request__tenant", "request__created_by", "actor").get(pk=event_id)
    if ev.transition == "create":
        return  # filing a draft is nobody else's business yet
    req = ev.request
    subject = f'[Headroom] Launch request "{req.title or req.uuid}" {VERBS.get(ev.transition, ev.transition)}'
    body = (
        f'{req.tenant.slug}: "{req.title}" {VERBS.get(ev.transition, ev.transition)} by {ev.actor.get_username()}.\n'
        f"State: {ev.from_state} → {ev.to_state}\n"
        + (f"Comment: {ev.comment}\n" if ev.comment else "")
        + f"\n{_link(f'/launch/{req.uuid}/')}\n"
    )
    batches: list[list[str]] = []
    if req.created_by.email:
        batches.append([req.created_by.email])
    if ev.transition == "submit":
        batches.append([e for e in _approver_emails() if e != req.created_by.email])
    for to in batches:
        if not to:
            continue
        try:
            send_mail(subject, body, None, to)
        except Exception:  # noqa: BLE001 — mail is best effort once the decision is committed
            log.exception("could not email %s about launch request %s", to, req.uuid)
