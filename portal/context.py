"""Navigation context: which sections a person sees."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from entitlements.roles import roles_of


def nav(request: HttpRequest) -> dict[str, Any]:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"roles": frozenset()}
    return {"roles": roles_of(user)}
