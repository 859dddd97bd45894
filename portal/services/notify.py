"""Launch-request notifications, through the alerts system (inbox, email task, tenant webhooks),
sent after the transition commits (never for a rolled-back one).

The requester hears about every step (inbox and email). Approvers hear about new work in their
queue by inbox and email (submit), and about their colleagues' decisions and withdrawals in the
inbox only. The tenant's webhook endpoints get every step as `launch_request.<transition>`.
"""

from __future__ import annotations

from alerts.dispatch import Message, message_deliver
from alerts.recipients import platform_staff

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
TO_APPROVERS = {"submit", "approve", "partially_approve", "reject", "return", "withdraw"}


def launch_request_notify(event_id: int) -> None:
    from portal.models import LaunchRequestEvent  # the model module imports nothing from here

    ev = LaunchRequestEvent.objects.select_related("request__tenant", "request__created_by", "actor").get(pk=event_id)
    if ev.transition == "create":
        return  # filing a draft is nobody else's business yet
    req = ev.request
    verb = VERBS.get(ev.transition, ev.transition)
    title = f'Launch request "{req.title or req.uuid}" {verb}'
    body = (
        f'{req.tenant.slug}: "{req.title}" {verb} by {ev.actor.get_username()}.\n'
        f"State: {_state(ev.from_state)} → {_state(ev.to_state)}\n"
        + "".join(f"{line}\n" for line in granted_lines(ev.changes))
        + (f"Comment: {ev.comment}\n" if ev.comment else "")
    )
    message = Message(
        kind=f"launch_request.{ev.transition}",
        title=title,
        body=body,
        link=f"/launch/{req.uuid}/",
        data={
            "launch_request": str(req.uuid),
            "tenant": req.tenant.slug,
            "transition": ev.transition,
            "from_state": ev.from_state,
            "to_state": ev.to_state,
            "actor": ev.actor.get_username(),
        },
    )
    message_deliver(message=message, people=[req.created_by], webhooks_of=req.tenant)
    if ev.transition in TO_APPROVERS:
        approvers = platform_staff(roles=("approver",)).exclude(pk__in={req.created_by_id, ev.actor_id})
        message_deliver(message=message, people=approvers, email=ev.transition == "submit")


def _state(key: str) -> str:
    """A state in words ("partially_approved" → "Partially approved"), as the pages show it."""
    from portal.models import State

    return str(State(key).label) if key in State.values else key.replace("_", " ")


def granted_lines(changes: dict) -> list[str]:
    """What a decision granted, per region: "us-east: approved 6.0 of 10.0 CU" (an approval grants all)."""
    out = []
    for region, got in sorted((changes.get("regions") or {}).items()):
        if isinstance(got, dict) and "approved_cu" in got:
            asked = f" of {float(got['requested_cu']):,.1f}" if got.get("requested_cu") else ""
            out.append(f"{region}: approved {float(got['approved_cu']):,.1f}{asked} CU")
    return out
