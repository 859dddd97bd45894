"""`Authorization: Token <key>` or `Bearer <key>` against hashed ApiToken rows, with the token's scope.

A token acts as its owner narrowed by its scope: `read` refuses writes, `gateway` reaches only the
gateway endpoints (views guarded by IsGateway), and a tenant-scoped token acts as a viewer of that
tenant. Expired and revoked tokens are refused. Revocations (and role removals, deactivations)
bump the token-revocation epoch: `epoch_bumped` is sent and the serving path (admission.apps)
moves the epoch in its own store, where caches of verified keys in every process are checked
against it (docs/serving-path-faults.md).
"""

from __future__ import annotations

from typing import Any

import django.dispatch
from django.utils import timezone
from rest_framework import authentication, exceptions
from rest_framework.permissions import SAFE_METHODS

from entitlements import roles
from entitlements.models.tenancy import ApiToken, hash_key
from http_plumbing.throttles import InvalidTokenThrottle, known_good, known_here, remember_good

KEYWORDS = (b"token", b"bearer")
TOUCH_EVERY_S = 60.0

# Sent after a token was revoked, a platform role removed or a user deactivated (committed).
epoch_bumped = django.dispatch.Signal()


def parse_header(raw: bytes) -> str | None:
    """The key of `Token <key>` / `Bearer <key>`; None for another scheme or no header.
    Raises AuthenticationFailed for our scheme with the wrong number of parts."""
    parts = raw.split()
    if not parts or parts[0].lower() not in KEYWORDS:
        return None
    if len(parts) != 2:
        raise exceptions.AuthenticationFailed("Authorization: Token <key> expects exactly one key")
    return parts[1].decode(errors="replace")


def bump_revocation_epoch() -> None:
    epoch_bumped.send(sender=ApiToken)


def touch(token: ApiToken) -> None:
    """Record a use, at most once a minute per token, so the hot path does not write on every call."""
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > TOUCH_EVERY_S:
        token.last_used_at = now
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


def narrow(user: Any, token: ApiToken) -> None:
    """Apply a tenant-scoped token's narrowing to this request's user object."""
    if token.tenant_id is not None:
        user._headroom_roles = frozenset({roles.VIEWER})
        user._headroom_tenant = token.tenant


def is_gateway_view(view: Any) -> bool:
    from entitlements.permissions import IsGateway

    return any(isinstance(p, type) and issubclass(p, IsGateway) for p in getattr(view, "permission_classes", ()))


def check_scope(token: ApiToken, method: str, view: Any) -> None:
    if token.scope == ApiToken.Scope.READ and method not in SAFE_METHODS:
        raise exceptions.PermissionDenied("this token is read-only")
    if token.scope == ApiToken.Scope.GATEWAY and not is_gateway_view(view):
        raise exceptions.PermissionDenied("this token reaches the gateway endpoints only")


def lookup(key: str) -> ApiToken:
    now = timezone.now()
    token = (
        ApiToken.objects.select_related("user", "tenant")
        .filter(key_hash=hash_key(key), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active or (token.expires_at is not None and token.expires_at <= now):
        raise exceptions.AuthenticationFailed("invalid or revoked token")
    return token


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        key = parse_header(authentication.get_authorization_header(request))
        if key is None:
            return None
        token = self._looked_up(request, key)
        remember_good(token.key_hash)
        check_scope(token, request.method, (getattr(request, "parser_context", None) or {}).get("view"))
        touch(token)
        narrow(token.user, token)
        return token.user, token

    @staticmethod
    def _looked_up(request: Any, key: str) -> ApiToken:
        """The key's token, behind the per-address throttle. A key this process verified lately is
        looked up uncounted (the gateway's hot path pays no cache round trip); any other attempt is
        counted before its lookup and given back if it checks out."""
        throttle = InvalidTokenThrottle()
        hashed = hash_key(key)
        if known_here(hashed):
            try:
                return lookup(key)
            except exceptions.AuthenticationFailed:
                throttle.record_failure(request)
                raise
        wait = throttle.take(request)
        if wait is not None and not known_good(hashed):
            raise exceptions.Throttled(wait, detail="too many invalid tokens from this address")
        token = lookup(key)  # a failure stays counted
        throttle.give_back(request)
        return token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
