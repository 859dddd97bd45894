"""Which sign-in failures django-axes counts together (config/settings.py points AXES_USERNAME_CALLABLE and
AXES_LOCKOUT_PARAMETERS here).

A password sign-in counts per account and per address, as before. An OIDC callback has no user name, and
axes would count every refusal under one empty name, so five refused identities locked OIDC sign-in for
everyone. Here an OIDC failure counts under the provider's (issuer, subject) once its ID token checked out,
and only that identity is locked by it; a failure with no checked identity (a bad code, a token that did
not check out) counts under "oidc:unverified" from its address, so at worst it locks that path from that
address, as wrong passwords lock the form from theirs. The subject's lock is checked by the backend once
the token names it (accounts_oidc.backends), since axes' own check runs before the code is exchanged."""

from __future__ import annotations

from typing import Any

from axes.handlers.proxy import AxesProxyHandler

IDENTITY_ATTR = "_oidc_identity"  # on the request: None in an OIDC callback until the token names a subject
UNVERIFIED = "oidc:unverified"
NOT_COUNTED = "oidc:not-counted"  # the provider failed (unreachable, an error): nobody's attempt to count
PASSWORD_PARAMETERS: list[str | list[str]] = ["username", "ip_address"]  # either one locks


def start_callback(request: Any) -> None:
    setattr(request, IDENTITY_ATTR, None)


def identity(issuer: str, subject: str) -> str:
    return f"oidc:{issuer}#{subject}"


def name_subject(request: Any, issuer: str, subject: str) -> str:
    name = identity(issuer, subject)
    setattr(request, IDENTITY_ATTR, name)
    return name


def provider_failed(request: Any) -> None:
    setattr(request, IDENTITY_ATTR, NOT_COUNTED)


def _oidc_name(request: Any) -> str | None:
    if request is None or not hasattr(request, IDENTITY_ATTR):
        return None
    return getattr(request, IDENTITY_ATTR) or UNVERIFIED


def username(request: Any, credentials: dict[str, Any] | None) -> str | None:
    """AXES_USERNAME_CALLABLE: the form's or the caller's user name; in an OIDC callback, the identity."""
    if credentials and credentials.get("username"):
        return str(credentials["username"])
    oidc = _oidc_name(request)
    if oidc is not None:
        return None if oidc == NOT_COUNTED else oidc
    data = getattr(request, "data", None) or getattr(request, "POST", {})
    return data.get("username") if hasattr(data, "get") else None


def parameters(request_or_attempt: Any, credentials: dict[str, Any] | None) -> list[str | list[str]]:
    """AXES_LOCKOUT_PARAMETERS: a checked OIDC identity alone; an unchecked OIDC failure with its address."""
    if _is_request(request_or_attempt):
        if _oidc_name(request_or_attempt) == NOT_COUNTED:
            return ["username"]  # with no user name, axes records nothing
        name = username(request_or_attempt, credentials)
    else:
        name = getattr(request_or_attempt, "username", None)  # an AccessAttempt row (axes' own resets)
    if name == UNVERIFIED:
        return [["username", "ip_address"]]
    if name is not None and name.startswith("oidc:"):
        return ["username"]
    return PASSWORD_PARAMETERS


def _is_request(obj: Any) -> bool:
    return hasattr(obj, "META")


def is_locked(request: Any, name: str) -> bool:
    """Whether this OIDC identity has reached the failure limit (the callback's request, as axes prepared it)."""
    return not AxesProxyHandler.is_allowed(request, {"username": name})
