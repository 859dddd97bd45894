"""The portal's own error pages (config/urls.py handler400…500, and 405 via ErrorPageMiddleware).

Each renders its template in the portal's layout. The 500 page renders without the request's
context processors' database reads going wrong twice: if the layout itself fails, a plain page.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.template import loader


def _page(request: HttpRequest, status: int, detail: str = "") -> HttpResponse:
    try:
        body: str = loader.render_to_string(f"{status}.html", {"detail": detail}, request=request)
    except Exception:  # noqa: BLE001 - an error page must not fail in turn
        body = f"<!doctype html><title>{status}</title><h1>{status}</h1><p><a href='/'>Back to Headroom</a></p>"
    return HttpResponse(body, status=status)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, 403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _page(request, 404)


def server_error(request: HttpRequest) -> HttpResponse:
    return _page(request, 500)


class ErrorPageMiddleware:
    """A bare 405 from a page view (`require_POST` and friends answer with an empty body) gets the
    portal's 405 page, keeping its Allow header. The API's 405s are JSON already and left alone."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if isinstance(response, HttpResponseNotAllowed) and not request.path.startswith("/api/"):
            page = _page(request, 405)
            page["Allow"] = response["Allow"]
            return page
        return response
