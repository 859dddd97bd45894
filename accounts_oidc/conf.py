"""Plain parsers config/settings.py reads the OIDC settings with (config.env.env_parsed; no Django settings
here: they load first). A bad value raises ValueError, which stops the start naming the variable. Nothing
here imports config: the project reads the environment, the app keeps its rules."""

from __future__ import annotations

TENANT_ROLES = ("viewer", "requester")
PLATFORM_ROLES = ("approver", "operator")
# `gateway` is a serving-path account that cannot sign in (entitlements.roles.is_person): never from a claim.
CLAIMABLE_ROLES = frozenset(TENANT_ROLES + PLATFORM_ROLES)
OIDC_BACKEND = "accounts_oidc.backends.HeadroomOIDCBackend"
PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"


def parse_map(raw: str, *, values: frozenset[str] | None = None) -> dict[str, str]:
    """`a=b,c=d` → {"a": "b", "c": "d"}; blanks ignored. With `values`, each value must be one of them."""
    out: dict[str, str] = {}
    for part in (raw or "").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise ValueError(f"expected claim_value=headroom_value, got {part!r}")
        if values is not None and value.strip() not in values:
            raise ValueError(f"{value.strip()!r} is none of {', '.join(sorted(values))}")
        out[key.strip()] = value.strip()
    return out


def parse_claimable_map(raw: str) -> dict[str, str]:
    """OIDC_ROLE_MAP: a claim value to one of the roles a claim may grant."""
    return parse_map(raw, values=CLAIMABLE_ROLES)


def parse_roles(raw: str) -> frozenset[str]:
    roles = frozenset(r.strip() for r in (raw or "").split(",") if r.strip())
    unknown = roles - CLAIMABLE_ROLES
    if unknown:
        raise ValueError(
            f"claims may grant only {', '.join(sorted(CLAIMABLE_ROLES))}; not {', '.join(sorted(unknown))}"
        )
    return roles


def backends(base: list[str], *, oidc_enabled: bool, local_login: bool) -> list[str]:
    """The authentication backends: the OIDC one when configured; the password one only while local login is on
    (so the admin's login refuses passwords too)."""
    out = [b for b in base if local_login or b != PASSWORD_BACKEND]
    if oidc_enabled and OIDC_BACKEND not in out:
        out.append(OIDC_BACKEND)
    return out
