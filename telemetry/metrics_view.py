"""`/metrics` (telemetry/urls.py): Prometheus exposition for scrapers on an allow-listed address or with an API token.

Allowed: a client address inside METRICS_ALLOWED_IPS (comma-separated addresses or CIDR blocks;
default loopback only, 127.0.0.1 and ::1, for a scraper on the same host), or an
`Authorization: Bearer|Token <key>` of an operator or gateway account (a Prometheus elsewhere:
`authorization: {credentials: <key>}` in its scrape config). Anyone else: 401 without a token,
403 with one that is not allowed. Invalid tokens count towards the per-address throttle.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from prometheus_client import CONTENT_TYPE_LATEST
from rest_framework.permissions import BasePermission
from rest_framework.views import APIView

from entitlements import roles
from entitlements.auth import ApiTokenAuthentication
from http_plumbing.throttles import client_address
from telemetry.exposition import exposition


@lru_cache(maxsize=8)
def _networks(spec: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def address_allowed(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    spec = str(getattr(settings, "METRICS_ALLOWED_IPS", "127.0.0.1,::1"))
    return any(ip in net for net in _networks(spec) if net.version == ip.version)


class MetricsAccess(BasePermission):
    message = "metrics: an allow-listed address or an operator's or gateway's token"

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.auth is not None:
            return roles.has_any(request.user, roles.OPERATOR, roles.GATEWAY)
        return address_allowed(client_address(request))


@extend_schema(exclude=True)  # Prometheus text, not a JSON API: kept out of the schema
class MetricsView(APIView):
    authentication_classes = [ApiTokenAuthentication]
    permission_classes = [MetricsAccess]

    def get(self, request: Any) -> HttpResponse:
        return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)
