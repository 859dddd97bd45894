"""`Authorization: Token <key>` against hashed ApiToken rows."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from rest_framework import authentication, exceptions

from entitlements.models.tenancy import ApiToken, hash_key


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: Token <key> expects exactly one key")
        key = header[1].decode(errors="replace")
        token = ApiToken.objects.select_related("user").filter(key_hash=hash_key(key), revoked_at__isnull=True).first()
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("invalid or revoked token")
        now = timezone.now()
        # Touch at most once a minute so the hot path does not write on every call.
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token

    def authenticate_header(self, request: Any) -> str:
        return self.keyword
