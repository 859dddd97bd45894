"""Content-Security-Policy on every response (issue 29).

Scripts run only from this site's own files: no inline <script>, no on*= attributes, no eval. So an
injected tag or attribute that slipped past template escaping runs nothing. The pages keep their
script in static/js (data-* attributes name what it acts on) and their data in json_script blocks,
which are type="application/json" and are not scripts to the policy.

Styles allow 'unsafe-inline': plotly and htmx write style elements and attributes as they draw,
and the templates set widths and colours inline. Style injection cannot run code; the script rule
is what CSP protects against.

CONTENT_SECURITY_POLICY (settings) holds the policy. A view that set its own header keeps it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


def policy_text(policy: dict[str, str]) -> str:
    return "; ".join(f"{name} {value}" for name, value in policy.items())


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and HEADER not in response:
            response[HEADER] = policy_text(policy)
        return response
