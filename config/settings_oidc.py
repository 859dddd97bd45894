"""The OIDC sign-in's settings (accounts_oidc; docs/access.md, "OIDC sign-in"), read from the environment;
config/settings.py star-imports them and adds the app and its authentication backend.

On when OIDC_RP_CLIENT_ID is set. Endpoints come from OIDC_OP_ISSUER's discovery document unless each
OIDC_OP_*_ENDPOINT is given; the ID token's `iss` must equal OIDC_OP_ISSUER and its `aud` hold the client id.
Claims: OIDC_TENANT_CLAIM names one tenant (a slug, or a value OIDC_TENANT_MAP maps to one: `value=slug,…`;
an unknown tenant refuses the sign-in, none is ever created); OIDC_ROLES_CLAIM holds values OIDC_ROLE_MAP
maps to roles (`value=role,…`; empty: the role names themselves). Claims grant and remove only the roles in
OIDC_CLAIM_GRANTABLE_ROLES (viewer, requester, approver, operator; never gateway); a member without a
claimed tenant role gets OIDC_DEFAULT_TENANT_ROLE. HEADROOM_LOCAL_LOGIN=0 switches the password sign-in
off (the login page then offers only the provider; the admin refuses passwords too).
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from accounts_oidc import conf as oidc_conf  # plain helpers, no Django import
from config.env import env_bool, env_float, env_int, env_parsed, env_str

__all__ = [
    "OIDC_RP_CLIENT_ID",
    "OIDC_RP_CLIENT_SECRET",
    "OIDC_ENABLED",
    "OIDC_PROVIDER_NAME",
    "OIDC_OP_ISSUER",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
    "OIDC_DISCOVERY_TTL_S",
    "OIDC_RP_SIGN_ALGO",
    "OIDC_RP_SCOPES",
    "OIDC_USE_PKCE",
    "OIDC_TIMEOUT",
    "OIDC_VERIFY_SSL",
    "OIDC_CLOCK_SKEW_S",
    "OIDC_USERNAME_CLAIM",
    "OIDC_TENANT_CLAIM",
    "OIDC_TENANT_MAP",
    "OIDC_ROLES_CLAIM",
    "OIDC_ROLE_MAP",
    "OIDC_CLAIM_GRANTABLE_ROLES",
    "OIDC_DEFAULT_TENANT_ROLE",
    "OIDC_CREATE_USER",
    "OIDC_STORE_ID_TOKEN",
    "LOGIN_REDIRECT_URL_FAILURE",
    "LOCAL_LOGIN",
]

OIDC_RP_CLIENT_ID = env_str("OIDC_RP_CLIENT_ID", "")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_RP_CLIENT_SECRET", "")
OIDC_ENABLED = bool(OIDC_RP_CLIENT_ID)
OIDC_PROVIDER_NAME = env_str("OIDC_PROVIDER_NAME", "single sign-on")
OIDC_OP_ISSUER = env_str("OIDC_OP_ISSUER", "")
OIDC_OP_AUTHORIZATION_ENDPOINT = env_str("OIDC_OP_AUTHORIZATION_ENDPOINT", "")
OIDC_OP_TOKEN_ENDPOINT = env_str("OIDC_OP_TOKEN_ENDPOINT", "")
OIDC_OP_USER_ENDPOINT = env_str("OIDC_OP_USER_ENDPOINT", "")
OIDC_OP_JWKS_ENDPOINT = env_str("OIDC_OP_JWKS_ENDPOINT", "")
OIDC_DISCOVERY_TTL_S = env_float("OIDC_DISCOVERY_TTL_S", 3600)
OIDC_RP_SIGN_ALGO = env_str("OIDC_RP_SIGN_ALGO", "RS256")
OIDC_RP_SCOPES = env_str("OIDC_RP_SCOPES", "openid email profile")
OIDC_USE_PKCE = env_bool("OIDC_USE_PKCE", True)
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 10)
OIDC_VERIFY_SSL = env_bool("OIDC_VERIFY_SSL", True)
OIDC_CLOCK_SKEW_S = env_int("OIDC_CLOCK_SKEW_S", 60)
OIDC_USERNAME_CLAIM = env_str("OIDC_USERNAME_CLAIM", "preferred_username")
OIDC_TENANT_CLAIM = env_str("OIDC_TENANT_CLAIM", "headroom_tenant")
OIDC_TENANT_MAP = env_parsed("OIDC_TENANT_MAP", oidc_conf.parse_map)
OIDC_ROLES_CLAIM = env_str("OIDC_ROLES_CLAIM", "headroom_roles")
OIDC_ROLE_MAP = env_parsed("OIDC_ROLE_MAP", oidc_conf.parse_claimable_map)
OIDC_CLAIM_GRANTABLE_ROLES = env_parsed("OIDC_CLAIM_GRANTABLE_ROLES", oidc_conf.parse_roles, "viewer,requester")
OIDC_DEFAULT_TENANT_ROLE = env_str("OIDC_DEFAULT_TENANT_ROLE", "viewer")
OIDC_CREATE_USER = True
OIDC_STORE_ID_TOKEN = False
LOGIN_REDIRECT_URL_FAILURE = "login"
LOCAL_LOGIN = env_bool("HEADROOM_LOCAL_LOGIN", True)
if not LOCAL_LOGIN and not OIDC_ENABLED:
    raise ImproperlyConfigured(
        "HEADROOM_LOCAL_LOGIN=0 needs OIDC sign-in configured (OIDC_RP_CLIENT_ID), or nobody can sign in"
    )
if OIDC_ENABLED and not OIDC_OP_ISSUER:
    raise ImproperlyConfigured("OIDC_OP_ISSUER is required with OIDC_RP_CLIENT_ID")
