"""The provider's endpoints: each `OIDC_OP_*_ENDPOINT` setting when given, else from the issuer's discovery
document (`<OIDC_OP_ISSUER>/.well-known/openid-configuration`), fetched once and kept `OIDC_DISCOVERY_TTL_S`."""

from __future__ import annotations

import threading
import time
from typing import Any

import requests
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from mozilla_django_oidc.utils import import_from_settings

ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_lock = threading.Lock()
_cache: dict[str, tuple[float, dict[str, Any]]] = {}


def issuer() -> str:
    value = getattr(settings, "OIDC_OP_ISSUER", "")
    if not value:
        raise ImproperlyConfigured("OIDC_OP_ISSUER is required: the ID token's `iss` is checked against it")
    return str(value)


def document(iss: str) -> dict[str, Any]:
    now = time.monotonic()
    with _lock:
        hit = _cache.get(iss)
        if hit and hit[0] > now:
            return hit[1]
    resp = requests.get(
        iss.rstrip("/") + "/.well-known/openid-configuration",
        timeout=settings.OIDC_TIMEOUT,
        verify=settings.OIDC_VERIFY_SSL,
    )
    resp.raise_for_status()
    doc = resp.json()
    if doc.get("issuer") != iss:  # OpenID Connect Discovery 1.0 §4.3
        raise ImproperlyConfigured(f"the discovery document names issuer {doc.get('issuer')!r}, not {iss!r}")
    with _lock:
        _cache[iss] = (now + settings.OIDC_DISCOVERY_TTL_S, doc)
    return doc


def forget() -> None:
    with _lock:
        _cache.clear()


def get_setting(name: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings reader, with the endpoints filled in from discovery."""
    if name in ENDPOINTS:
        explicit = getattr(settings, name, "")
        if explicit:
            return explicit
        return document(issuer()).get(ENDPOINTS[name], "")
    return import_from_settings(name, *default)
