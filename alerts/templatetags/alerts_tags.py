"""`{% unread_count as n %}` for the nav's inbox link: one COUNT on an indexed (user, read_at)."""

from __future__ import annotations

from typing import Any

from django import template

from alerts.selectors import unread_count as _unread_count

register = template.Library()


@register.simple_tag(takes_context=True)
def unread_count(context: Any) -> int:
    request = context.get("request")
    return _unread_count(getattr(request, "user", None))
