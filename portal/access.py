"""Who may open a portal page: the one web check that refuses non-people (entitlements.roles.is_person).

Every page for people uses require_person or person_required; the refusal's status is the page's
own (404 where the page hides that it exists, 403 elsewhere), the rule is the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse

from entitlements import roles


def require_person(request: HttpRequest, *, hide: bool = False, message: str = "no page for this account") -> None:
    """Refuse a gateway-only or role-less account: Http404 when `hide`, else PermissionDenied."""
    if roles.is_person(request.user):
        return
    if hide:
        raise Http404
    raise PermissionDenied(message)


def person_required(
    *, hide: bool = False, message: str = "no page for this account"
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorator: sign-in first (login_required), then require_person."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @login_required
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            require_person(request, hide=hide, message=message)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate
