"""/favicon.ico: browsers ask for it at the root whatever the page links; send them to the static icon."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponsePermanentRedirect
from django.templatetags.static import static


def favicon(request: HttpRequest) -> HttpResponsePermanentRedirect:
    return HttpResponsePermanentRedirect(static("favicon.svg"))  # resolved per request: the manifest's hashed name
