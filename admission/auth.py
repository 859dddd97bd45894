"""Token authentication for the serving path, cached in-process.

The entitlements token check costs three queries (token, platform roles, membership) per
request; the reserve path is otherwise query-free, so it remembers a verified key for a short
time (ADMISSION_AUTH_CACHE_S, default 30 s). Each entry carries the revocation epoch it was
verified under (entitlements.auth: bumped on every revocation, shared through the Django cache,
so Redis across processes and machines); an entry from an older epoch is verified again, so a
revoked token is refused on its next request in every process. Expiry and scope are checked on
hits too, and a hit records the use (at most once a minute per token).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions

from entitlements import roles
from entitlements.auth import ApiTokenAuthentication, check_scope, parse_header, revocation_epoch, touch
from entitlements.models.tenancy import ApiToken, hash_key

_cache: dict[str, tuple[float, int, Any, Any]] = {}  # key hash → (valid until, epoch, user, token)
_lock = threading.Lock()
MAX_KEYS = 10_000


_epoch_seen: list[float] = [0.0, -1.0]  # (read at, epoch): ADMISSION_REVOCATION_POLL_S memo


def _epoch() -> int:
    """The shared revocation epoch: read on every request by default (exact: a revocation is refused
    on the next request in every process), or at most every ADMISSION_REVOCATION_POLL_S seconds for a
    deployment that trades that bound for one cache round trip less per request."""
    poll = settings.ADMISSION_REVOCATION_POLL_S
    now = time.monotonic()
    if poll <= 0 or now - _epoch_seen[0] > poll:
        _epoch_seen[:] = [now, float(revocation_epoch())]
    return int(_epoch_seen[1])


def _hit(key: str) -> tuple[Any, Any] | None:
    hit = _cache.get(hash_key(key))
    if hit is None or hit[0] <= time.monotonic() or hit[1] != _epoch():
        return None
    token = hit[3]
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return None
    touch(token)
    return hit[2], token


class CachedGatewayTokenAuthentication(ApiTokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        try:
            key = parse_header(authentication.get_authorization_header(request))
        except exceptions.AuthenticationFailed:
            key = None
        if key is None:
            return super().authenticate(request)  # no token, or a malformed header: the usual answers
        got = _hit(key)
        if got is not None:
            check_scope(got[1], request.method, (getattr(request, "parser_context", None) or {}).get("view"))
            return got
        epoch = _epoch()  # read before verifying: a revocation after this makes the entry stale
        got = super().authenticate(request)  # raises on a bad, expired or revoked key: never cached
        if got is not None:
            roles.roles_of(got[0])  # computed once, kept on the cached user object
            ttl = settings.ADMISSION_AUTH_CACHE_S
            with _lock:
                if len(_cache) >= MAX_KEYS:
                    _cache.clear()
                _cache[hash_key(key)] = (time.monotonic() + ttl, epoch, got[0], got[1])
        return got


def remembered(authorization: str) -> tuple[Any, Any] | None:
    """(user, token) for an `Authorization: Token|Bearer <key>` header verified within the cache time
    and the current revocation epoch, else None (then the request takes the full authentication
    path). For api.py's fast path, which serves writes only: a read-only token never passes here."""
    try:
        key = parse_header(authorization.encode("iso-8859-1"))  # as DRF's get_authorization_header reads it
    except (UnicodeEncodeError, exceptions.AuthenticationFailed):
        return None
    if key is None:
        return None
    got = _hit(key)
    if got is None or got[1].scope == ApiToken.Scope.READ:
        return None
    return got
