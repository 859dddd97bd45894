"""Token authentication for the serving path, cached in-process.

The entitlements token check costs three queries (token, platform roles, membership) per
request; the reserve path is otherwise query-free, so it remembers a verified key for a short
time (ADMISSION_AUTH_CACHE_S, default 30 s). A revoked token is refused within that time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from rest_framework import authentication

from entitlements import roles
from entitlements.auth import ApiTokenAuthentication
from entitlements.models.tenancy import hash_key

_cache: dict[str, tuple[float, Any, Any]] = {}  # key hash → (valid until, user, token)
_lock = threading.Lock()
MAX_KEYS = 10_000


class CachedGatewayTokenAuthentication(ApiTokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != self.keyword.lower().encode():
            return super().authenticate(request)  # no token, or a malformed header: the usual answers
        h = hash_key(header[1].decode(errors="replace"))
        hit = _cache.get(h)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return hit[1], hit[2]
        got = super().authenticate(request)  # raises on a bad or revoked key: never cached
        if got is not None:
            roles.roles_of(got[0])  # computed once, kept on the cached user object
            ttl = float(getattr(settings, "ADMISSION_AUTH_CACHE_S", 30.0))
            with _lock:
                if len(_cache) >= MAX_KEYS:
                    _cache.clear()
                _cache[h] = (now + ttl, got[0], got[1])
        return got


def remembered(authorization: str) -> tuple[Any, Any] | None:
    """(user, token) for an `Authorization: Token <key>` header verified within the cache time,
    else None (then the request takes the full authentication path). For api.py's fast path."""
    parts = authorization.encode("iso-8859-1").split()  # as DRF's get_authorization_header reads it
    if len(parts) != 2 or parts[0].lower() != b"token":
        return None
    hit = _cache.get(hash_key(parts[1].decode(errors="replace")))
    if hit is None or hit[0] <= time.monotonic():
        return None
    return hit[1], hit[2]


def forget() -> None:
    """Drop every cached key (tests; after revoking a gateway token in this process)."""
    with _lock:
        _cache.clear()
