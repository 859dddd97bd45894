"""The serving path's own way through the middleware stack (issue 49.2).

A gateway's reserve or complete is a token-authenticated JSON POST: no session, no cookie, no CSRF
token, no messages, no htmx, no sign-in lockout and no HTML error page applies to it. Yet each of
those middlewares, URL resolution and DRF's view wrapper ran on every call, ~100 µs of a web worker's
CPU per reserve (bench/web_tier.py; docs/benchmarks.md). This middleware sits below the ones that do
apply (SecurityMiddleware's redirect and headers, the CSP header, CommonMiddleware's host check and
Content-Length, the NUL-query and body-size guards) and above the rest: for the two serving paths it
asks the view's own fast path (api._GatewayFastPath._fast), which takes only a well-formed call from a
gateway token verified within the cache time. Its answer gets the one header a skipped middleware
would have added (X-Frame-Options, from XFrameOptionsMiddleware itself) and goes back up the stack;
anything the fast path declines continues down the whole stack, to DRF, exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.urls import NoReverseMatch, get_resolver

_SLOW: Any = None  # api._SLOW, set with the first URLconf's views (api imports models: not at import time)


@lru_cache(maxsize=8)
def _views(urlconf: str) -> dict[str, Any]:
    """path_info (the path below the script prefix, as URL resolution reads it) → the fast path of the
    view served there, for the two serving-path routes (none if the URLconf does not mount them). Keyed
    by path_info, not path, so no per-request script-prefix lookup (a thread-local: ~1.5 µs)."""
    global _SLOW
    from admission import api

    _SLOW = api._SLOW
    resolver = get_resolver(urlconf)
    out = {}
    for name, cls in (("admission-reserve", api.ReserveView), ("admission-complete", api.CompleteView)):
        try:
            out["/" + resolver.reverse(name)] = cls()._fast
        except NoReverseMatch:
            continue
    return out


class ServingPathMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.xframe = XFrameOptionsMiddleware(get_response).get_xframe_options_value

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST":
            fast = _views(getattr(request, "urlconf", None) or settings.ROOT_URLCONF).get(request.path_info)
            if fast is not None:
                got = fast(request)
                if got is not _SLOW:
                    # XFrameOptionsMiddleware.process_response's header, written where it would write it:
                    # the answer is api._answer's, which has no X-Frame-Options and no exemption.
                    got.headers._store["x-frame-options"] = ("X-Frame-Options", self.xframe(request, got))
                    return got
        return self.get_response(request)
