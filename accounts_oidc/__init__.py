"""OIDC sign-in beside the local login (docs/access.md, "OIDC sign-in").

mozilla-django-oidc is the relying party; this app adds what Headroom needs on top of it: endpoints
from the issuer's discovery document, an ID token checked for issuer, audience and expiry, accounts
linked by (issuer, subject) only, and access re-synced from claims at every sign-in through
entitlements.role_services, within the roles the deployment lets claims grant.
"""
