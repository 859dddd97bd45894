"""The relying party's backend: mozilla-django-oidc's code flow, with a stricter ID-token check and
Headroom's account linking and claim sync (accounts_oidc.claims)."""

from __future__ import annotations

import logging
import re
from typing import Any

import jwt
import requests
from django.contrib.auth import get_user_model
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from accounts_oidc import claims as claim_rules
from accounts_oidc import discovery, lockout
from accounts_oidc.models import OidcIdentity
from entitlements import roles

log = logging.getLogger(__name__)
REFUSAL_ATTR = "_oidc_refusal"
REQUIRED = ["exp", "iat", "iss", "aud", "sub"]


class HeadroomOIDCBackend(OIDCAuthenticationBackend):
    """Endpoints are looked up when a sign-in needs them, not when the backend is made: Django makes one
    for every request of a signed-in person (get_user), which must not wait on the provider."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return discovery.get_setting(attr, *args)

    OIDC_OP_TOKEN_ENDPOINT = property(lambda self: self.get_settings("OIDC_OP_TOKEN_ENDPOINT"))
    OIDC_OP_USER_ENDPOINT = property(lambda self: self.get_settings("OIDC_OP_USER_ENDPOINT"))
    OIDC_OP_JWKS_ENDPOINT = property(lambda self: self.get_settings("OIDC_OP_JWKS_ENDPOINT"))
    OIDC_RP_CLIENT_ID = property(lambda self: self.get_settings("OIDC_RP_CLIENT_ID"))
    OIDC_RP_CLIENT_SECRET = property(lambda self: self.get_settings("OIDC_RP_CLIENT_SECRET"))
    OIDC_RP_SIGN_ALGO = property(lambda self: self.get_settings("OIDC_RP_SIGN_ALGO", "RS256"))
    OIDC_RP_IDP_SIGN_KEY = property(lambda self: self.get_settings("OIDC_RP_IDP_SIGN_KEY", None))

    # --- the ID token -------------------------------------------------------------------------------
    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        """Signature (the provider's key, the configured algorithm only), issuer, audience (this client),
        expiry and issue time (with OIDC_CLOCK_SKEW_S leeway), authorised party, nonce. Any failure:
        SuspiciousOperation. The library's own check leaves the audience unchecked."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"ID token is not a JWT: {exc}")
        if header.get("alg") != self.OIDC_RP_SIGN_ALGO:
            raise SuspiciousOperation(f"ID token algorithm {header.get('alg')!r} is not {self.OIDC_RP_SIGN_ALGO}")
        if self.OIDC_RP_SIGN_ALGO.startswith(("RS", "ES", "PS")):
            key: Any = self.OIDC_RP_IDP_SIGN_KEY or self.retrieve_matching_jwk(token)
        else:
            key = self.OIDC_RP_CLIENT_SECRET
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[self.OIDC_RP_SIGN_ALGO],
                audience=self.OIDC_RP_CLIENT_ID,
                issuer=discovery.issuer(),
                leeway=self.get_settings("OIDC_CLOCK_SKEW_S", 60),
                options={"require": REQUIRED},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}")
        aud = payload["aud"]
        if isinstance(aud, list) and len(aud) > 1 and payload.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise SuspiciousOperation("ID token for several audiences without this client as azp")
        if self.get_settings("OIDC_USE_NONCE", True) and kwargs.get("nonce") != payload.get("nonce"):
            raise SuspiciousOperation("ID token nonce does not match this sign-in")
        return payload

    # --- the sign-in --------------------------------------------------------------------------------
    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        """None unless the code flow, the token and the claims all pass; a refusal the person should
        read is left on the request for the callback view (accounts_oidc.views)."""
        if request is None or "code" not in request.GET or "state" not in request.GET:
            return None
        try:
            return super().authenticate(request, **kwargs)
        except claim_rules.SignInRefused as refusal:
            setattr(request, REFUSAL_ATTR, refusal)
        except (requests.RequestException, ImproperlyConfigured, ValueError) as exc:  # the provider's side
            log.error("OIDC sign-in failed talking to the provider: %s", exc)
            lockout.provider_failed(request)  # not the person's attempt: django-axes does not count it
            setattr(
                request,
                REFUSAL_ATTR,
                claim_rules.SignInRefused(
                    "The identity provider did not complete the sign-in; try again in a minute.",
                    title="Sign-in unavailable",
                    status=502,
                ),
            )
        except SuspiciousOperation as exc:
            log.warning("OIDC sign-in refused: %s", exc)
            setattr(
                request, REFUSAL_ATTR, claim_rules.SignInRefused("The identity provider's answer did not check out.")
            )
        return None

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        """The ID token checked out, so its subject is who this is: failures count under it from here on
        (accounts_oidc.lockout), and an identity past the failure limit is refused before anything changes."""
        request = getattr(self, "request", None)
        if request is not None:
            name = lockout.name_subject(request, str(payload["iss"]), str(payload["sub"]))
            if lockout.is_locked(request, name):
                raise claim_rules.SignInRefused(
                    "Too many refused sign-ins for this identity; try again later.",
                    title="Sign-in paused",
                    status=429,
                )
        return super().get_or_create_user(access_token, id_token, payload)

    def get_user(self, user_id: Any) -> Any:
        """As Django's ModelBackend: a deactivated account's sessions end (the library's own skips is_active)."""
        user = super().get_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        """The ID token's claims, completed by the userinfo endpoint when there is one (same `sub` only)."""
        merged = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            info = super().get_userinfo(access_token, id_token, payload)
            if str(info.get("sub")) != str(payload["sub"]):
                raise SuspiciousOperation("userinfo names another subject than the ID token")
            merged.update({k: v for k, v in info.items() if k not in ("iss", "aud", "exp", "iat", "nonce")})
        return merged

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub")) and bool(claims.get("iss"))

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        """Only the account linked to this (issuer, subject): never a local account by e-mail or name."""
        return self.UserModel.objects.filter(
            oidc_identity__issuer=claims["iss"], oidc_identity__subject=str(claims["sub"])
        )

    def _reason(self, claims: dict[str, Any]) -> str:
        return f"OIDC sign-in: claims of {claims['iss']} subject {claims['sub']}"

    @transaction.atomic
    def create_user(self, claims: dict[str, Any]) -> Any:
        access = claim_rules.access_from_claims(claims)  # refuses an unknown tenant before anything is written
        if not access.grants_anything:
            raise claim_rules.SignInRefused(
                "Your identity provider's claims grant no Headroom role here, so no account was made. "
                "Ask your administrators for access.",
                title="No access",
            )
        user = self.UserModel.objects.create_user(
            self._username(claims), email=claims.get("email") or ""
        )  # no password
        self._copy_profile(user, claims)
        OidcIdentity.objects.create(
            user=user, issuer=claims["iss"], subject=str(claims["sub"]), last_sign_in_at=timezone.now()
        )
        claim_rules.sync(user, access, reason=self._reason(claims))
        return user

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        access = claim_rules.access_from_claims(claims)  # a refusal (unknown tenant) changes nothing
        with transaction.atomic():
            self._copy_profile(user, claims)
            OidcIdentity.objects.filter(user=user).update(last_sign_in_at=timezone.now())
            claim_rules.sync(user, access, reason=self._reason(claims))
        if not roles.is_person(user):  # the removals stand; the sign-in does not
            raise claim_rules.SignInRefused(
                "Your identity provider's claims no longer grant a Headroom role here; your access was removed.",
                title="No access",
            )
        return user

    def _copy_profile(self, user: Any, claims: dict[str, Any]) -> None:
        user.email = claims.get("email") or user.email
        user.first_name = str(claims.get("given_name") or user.first_name)[:150]
        user.last_name = str(claims.get("family_name") or user.last_name)[:150]
        user.save(update_fields=["email", "first_name", "last_name"])

    def _username(self, claims: dict[str, Any]) -> str:
        """The provider's user name when free; else (a local account has it) the name with a suffix."""
        raw = str(claims.get(self.get_settings("OIDC_USERNAME_CLAIM", "preferred_username")) or claims["sub"])
        base = re.sub(r"[^\w.@+-]", "-", raw)[:120] or "oidc"
        users = get_user_model().objects
        name, n = base, 1
        while users.filter(username__iexact=name).exists():
            n += 1
            name = f"{base}-{n}"
        return name
