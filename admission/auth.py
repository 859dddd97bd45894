"""Token authentication for the serving path, cached in-process, checked by the store.

The entitlements token check costs three queries (token, platform roles, membership) per
request; the reserve path is otherwise query-free, so it remembers a verified key for a short
time (ADMISSION_AUTH_CACHE_S, default 30 s). Each entry carries the token-revocation epoch it was
verified under. The epoch lives in the admission store (bumped on every revocation, role removal
and deactivation) and the reserve/complete scripts compare it in the same call that decides, so
the check costs no round trip and no Django cache read: a cache outage is not a serving outage.
An entry from an older epoch gets EpochChanged (nothing decided): the key is verified again and
the call asked anew. While the store is down nothing compares the epoch: an entry lives at most
ADMISSION_AUTH_CACHE_S, which is then the staleness bound (docs/serving-path-faults.md).
Expiry and scope are checked on hits too, and a hit records the use (at most once a minute per token).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings
from django.utils import timezone
from rest_framework import authentication, exceptions

from admission.backends.base import EpochChanged
from entitlements import roles
from entitlements.auth import ApiTokenAuthentication, check_scope, parse_header, touch
from entitlements.models.tenancy import ApiToken, hash_key

_cache: dict[str, tuple[float, Any, Any]] = {}  # key hash → (valid until, user, token)
# An Authorization header → its key's hash: a gateway sends the same header on every call, so the fast
# path parses it and hashes the key (SHA-256) once, not per request. Only a function of the header:
# what the key may do is still decided by _cache, its expiry and the store's epoch.
_header_hashes: dict[str, str] = {}
_lock = threading.Lock()
MAX_KEYS = 10_000
TRIES = 3  # verifications per call when epochs keep changing under it; the last asks without a check
EPOCH_ATTR = "_headroom_epoch"  # on a cached token: the epoch it was verified under

# The last epoch this process learned from the store (None: none yet, so the first call is
# told the store's and verifies once).
_known: list[str | None] = [None]

T = TypeVar("T")


def epoch_of(token: Any) -> str | None:
    """The epoch `token` was verified under ("" before this process learned one); None for a
    request not authenticated by token (session: nothing to check)."""
    return getattr(token, EPOCH_ATTR, None)


def learned(epoch: str) -> None:
    _known[0] = epoch


def forget(token: Any) -> None:
    with _lock:
        _cache.pop(getattr(token, "key_hash", ""), None)


def _hit(key: str) -> tuple[Any, Any] | None:
    return _hit_hash(hash_key(key))


def _hit_hash(key_hash: str) -> tuple[Any, Any] | None:
    hit = _cache.get(key_hash)
    if hit is None or hit[0] <= time.monotonic():
        return None
    token = hit[2]
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return None
    touch(token)
    return hit[1], token


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
        epoch = _known[0] or ""  # taken before verifying: a revocation after this makes the entry stale
        got = super().authenticate(request)  # raises on a bad, expired or revoked key: never cached
        if got is not None:
            roles.roles_of(got[0])  # computed once, kept on the cached user object
            setattr(got[1], EPOCH_ATTR, epoch)
            ttl = settings.ADMISSION_AUTH_CACHE_S
            with _lock:
                if len(_cache) >= MAX_KEYS:
                    _cache.clear()
                _cache[hash_key(key)] = (time.monotonic() + ttl, got[0], got[1])
        return got


def remembered(authorization: str) -> tuple[Any, Any] | None:
    """(user, token) for an `Authorization: Token|Bearer <key>` header verified within the cache time,
    else None (then the request takes the full authentication path). For api.py's fast path, which
    serves writes only: a read-only token never passes here. The epoch is checked by the store."""
    key_hash = _header_hashes.get(authorization)
    if key_hash is None:
        try:
            key = parse_header(authorization.encode("iso-8859-1"))  # as DRF's get_authorization_header reads it
        except (UnicodeEncodeError, exceptions.AuthenticationFailed):
            return None
        if key is None:
            return None
        key_hash = hash_key(key)
        if len(_header_hashes) >= MAX_KEYS:
            _header_hashes.clear()
        _header_hashes[authorization] = key_hash
    got = _hit_hash(key_hash)
    if got is None or got[1].scope == ApiToken.Scope.READ:
        return None
    return got


def under_epoch(request: Any, call: Callable[[str | None], T], reauthenticate: Callable[[], None]) -> T:
    """`call(epoch)` with the epoch the request's token was verified under; when the store says it
    changed, the token is verified again (`reauthenticate`: DRF's authentication and permissions,
    which raise a 401 / 403 for a token revoked, a role removed or a user deactivated since) and
    the call made again."""
    for attempt in range(1, TRIES + 1):
        epoch = epoch_of(request.auth) if attempt < TRIES else None
        try:
            return call(epoch)
        except EpochChanged as changed:
            learned(changed.current)
            forget(request.auth)
            reauthenticate()
    raise AssertionError("unreachable: the last try is made without a check")
