"""`{% load states %}{% state_legend %}`: every launch-request state's badge and what it means, shown
where the badges first appear (the request list and the review queue)."""

from __future__ import annotations

from typing import Any

from django import template

from portal.models import State

register = template.Library()

MEANING = {
    State.DRAFT: "being written, only the tenant sees it",
    State.SUBMITTED: "waiting for an approver",
    State.RETURNED: "sent back for changes",
    State.APPROVED: "granted in full",
    State.PARTIALLY_APPROVED: "granted in part",
    State.REJECTED: "refused",
    State.WITHDRAWN: "withdrawn by the requester",
}


@register.inclusion_tag("portal/intake/_state_legend.html")
def state_legend() -> dict[str, Any]:
    return {"states": [(s.value, s.label, MEANING[s]) for s in State]}
