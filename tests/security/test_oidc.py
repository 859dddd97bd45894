"""OIDC sign-in (accounts_oidc) against a real OpenID Connect provider: django-oauth-toolkit in its own
process and database (tests/oidc_provider), its RSA key made here, its claims written by each test.

Chromium signs in through the provider and lands on its tenant's page; a role whose claim is gone is
removed at the next sign-in; a claim naming an unknown tenant gets a page naming it, and nothing is
created. The ID-token checks (signature, audience, expiry, issuer) run against the relying party's
verification with tokens signed by the provider's key, fetched through its JWKS. With local login off
the sign-in page has no password form and its POST is refused. The provider starts once per module.
"""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

import jwt
import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.test import Client
from jwcrypto import jwk

from accounts_oidc import conf
from accounts_oidc.backends import HeadroomOIDCBackend
from accounts_oidc.claims import SignInRefused, access_from_claims
from accounts_oidc.models import OidcIdentity
from entitlements.models import Membership, PlatformRole, RoleChange, Tenant
from tests.oidc_provider.server import CLIENT_ID, PASSWORD, ProviderServer, pem
from tests.security.oidc_setup import configured, running_provider

# A real provider process (django-oauth-toolkit under gunicorn) serves the whole module: `make test-slow`.
pytestmark = pytest.mark.slow

CLAIMS = {
    "alice": {"email": "alice@acme.test", "headroom_tenant": "acme", "headroom_roles": ["requester"]},
    "bob": {"email": "bob@acme.test", "headroom_tenant": "acme", "headroom_roles": ["viewer", "approver"]},
    "carol": {"email": "carol@initech.test", "headroom_tenant": "initech", "headroom_roles": ["requester"]},
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory):
    yield from running_provider(tmp_path_factory, "oidc-provider", CLAIMS)


@pytest.fixture
def oidc(settings, provider: ProviderServer) -> ProviderServer:
    return configured(settings, provider, CLAIMS, {"viewer", "requester", "approver"})


def _tenants() -> None:
    Tenant.objects.create(slug="acme", name="Acme Corp")
    Tenant.objects.create(slug="globex", name="Globex")


def _oidc_sign_in(browser: Any, base: str, username: str) -> tuple[Any, Any]:
    """A fresh browser: Headroom's sign-in page → the provider's → back to Headroom."""
    ctx = browser.new_context(base_url=base, viewport={"width": 1400, "height": 900})
    page = ctx.new_page()
    page.goto("/login/")
    page.click("#oidc-sign-in")
    page.wait_for_selector("#op-username")
    page.fill("#op-username", username)
    page.fill("#op-password", PASSWORD)
    page.click("#op-submit")
    page.wait_for_url(lambda url: url.startswith(base) and "/oidc/" not in url or "/oidc/callback/" in url)
    page.wait_for_load_state()
    return ctx, page


# --- in Chromium ----------------------------------------------------------------------------------


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_sign_in_creates_the_member_and_lands_on_their_tenants_page(oidc, live_server, browser):
    _tenants()
    ctx, page = _oidc_sign_in(browser, live_server.url, "alice")
    assert page.url == f"{live_server.url}/"
    assert page.locator("h1").inner_text() == "Acme Corp: entitlements"
    assert "requester" in page.locator(".whoami").inner_text()
    ctx.close()

    user = get_user_model().objects.get(username="alice")
    assert (user.email, user.has_usable_password()) == ("alice@acme.test", False)
    assert OidcIdentity.objects.get(user=user).issuer == oidc.issuer
    m = Membership.objects.get(user=user)
    assert (m.tenant.slug, m.role) == ("acme", "requester")
    assert not PlatformRole.objects.filter(user=user).exists()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_role_whose_claim_is_removed_is_removed_at_the_next_sign_in(oidc, live_server, browser):
    _tenants()
    ctx, page = _oidc_sign_in(browser, live_server.url, "bob")
    assert page.url == f"{live_server.url}/"
    assert "approver" in page.locator(".whoami").inner_text()
    ctx.close()
    bob = get_user_model().objects.get(username="bob")
    assert set(PlatformRole.objects.filter(user=bob).values_list("role", flat=True)) == {"approver"}

    oidc.set_claims({**CLAIMS, "bob": {**CLAIMS["bob"], "headroom_roles": ["viewer"]}})
    ctx, page = _oidc_sign_in(browser, live_server.url, "bob")
    assert page.locator("h1").inner_text() == "Acme Corp: entitlements"  # a tenant viewer's page now
    assert "approver" not in page.locator(".whoami").inner_text()
    ctx.close()

    assert not PlatformRole.objects.filter(user=bob).exists()
    assert Membership.objects.get(user=bob).role == "viewer"
    removal = RoleChange.objects.filter(user_id=bob.pk, table_name="entitlements_platformrole", op="delete").get()
    assert removal.actor_id is None and removal.reason.startswith(f"OIDC sign-in: claims of {oidc.issuer}")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_claim_naming_no_known_tenant_gets_a_page_naming_it_and_nothing_is_created(oidc, live_server, browser):
    _tenants()
    ctx, page = _oidc_sign_in(browser, live_server.url, "carol")
    assert "/oidc/callback/" in page.url
    assert page.locator("h1").inner_text() == "Unknown tenant"
    assert "“initech”" in page.locator("#oidc-refusal").inner_text()
    page.goto("/")
    assert page.url.startswith(f"{live_server.url}/login/")  # not signed in
    ctx.close()
    assert sorted(Tenant.objects.values_list("slug", flat=True)) == ["acme", "globex"]
    assert not get_user_model().objects.filter(username="carol").exists()
    assert not OidcIdentity.objects.exists()


# --- local login off -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_with_local_login_off_the_password_form_is_gone_and_its_post_refused(oidc, settings):
    settings.LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = conf.backends(
        settings.AUTHENTICATION_BACKENDS, oidc_enabled=True, local_login=False
    )
    get_user_model().objects.create_user("local", password="a-long-password", is_staff=True)
    c = Client()
    page = c.get("/login/").content.decode()
    assert "Sign in with Test IdP" in page
    assert 'name="password"' not in page and 'name="username"' not in page

    resp = c.post("/login/", {"username": "local", "password": "a-long-password"})
    assert resp.status_code == 403
    assert "_auth_user_id" not in c.session
    c.post("/admin/login/", {"username": "local", "password": "a-long-password", "next": "/admin/"})
    assert "_auth_user_id" not in c.session  # no password backend at all


@pytest.mark.django_db
def test_with_local_login_on_the_page_offers_both(oidc):
    page = Client().get("/login/").content.decode()
    assert "Sign in with Test IdP" in page and 'name="password"' in page


@pytest.mark.django_db
def test_the_flow_starts_at_the_discovered_endpoint_and_a_code_the_provider_refuses_gets_a_page(oidc):
    c = Client()
    start = c.get("/oidc/authenticate/?next=/planning/")
    assert start.status_code == 302
    url = urlparse(start["Location"])
    query = parse_qs(url.query)
    assert f"{url.scheme}://{url.netloc}{url.path}" == f"{oidc.issuer}/authorize/"
    assert (query["client_id"], query["code_challenge_method"]) == ([CLIENT_ID], ["S256"])
    assert query["redirect_uri"] == ["http://testserver/oidc/callback/"] and query["nonce"]

    back = c.get("/oidc/callback/", {"code": "not-a-code", "state": query["state"][0]})
    assert back.status_code == 502 and b"did not complete the sign-in" in back.content
    assert "_auth_user_id" not in c.session


@pytest.mark.django_db
def test_a_deactivated_accounts_oidc_session_ends(oidc):
    user = get_user_model().objects.create_user("dora")
    backend = HeadroomOIDCBackend()
    assert backend.get_user(user.pk) == user
    user.is_active = False
    user.save()
    assert backend.get_user(user.pk) is None


# --- the ID token: unit level, signed with the provider's key ------------------------------------------


def _token(provider: ProviderServer, **overrides: Any) -> str:
    now = int(time.time())
    claims = {"iss": provider.issuer, "aud": CLIENT_ID, "sub": "42", "iat": now, "exp": now + 300, "nonce": "n-1"}
    claims.update(overrides)
    kid = jwk.JWK.from_pem(pem(provider.key)).thumbprint()
    return jwt.encode(claims, provider.key, algorithm="RS256", headers={"kid": kid})


def test_a_good_id_token_passes(oidc):
    assert HeadroomOIDCBackend().verify_token(_token(oidc), nonce="n-1")["sub"] == "42"


def test_a_tampered_id_token_is_refused(oidc):
    header, payload, signature = _token(oidc).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["sub"] = "1"  # someone else
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(SuspiciousOperation, match="Signature verification failed"):
        HeadroomOIDCBackend().verify_token(f"{header}.{forged}.{signature}", nonce="n-1")


def test_an_id_token_for_another_audience_is_refused(oidc):
    with pytest.raises(SuspiciousOperation, match="Audience doesn.t match"):
        HeadroomOIDCBackend().verify_token(_token(oidc, aud="another-client"), nonce="n-1")


def test_an_expired_id_token_is_refused(oidc):
    now = int(time.time())
    with pytest.raises(SuspiciousOperation, match="expired"):
        HeadroomOIDCBackend().verify_token(_token(oidc, iat=now - 3600, exp=now - 600), nonce="n-1")


def test_an_id_token_from_another_issuer_or_unsigned_or_for_another_sign_in_is_refused(oidc):
    backend = HeadroomOIDCBackend()
    with pytest.raises(SuspiciousOperation, match="issuer"):
        backend.verify_token(_token(oidc, iss="http://127.0.0.1:1/o"), nonce="n-1")
    unsigned = jwt.encode({"iss": oidc.issuer, "aud": CLIENT_ID, "sub": "42"}, None, algorithm="none")
    with pytest.raises(SuspiciousOperation, match="algorithm"):
        backend.verify_token(unsigned, nonce="n-1")
    with pytest.raises(SuspiciousOperation, match="nonce"):
        backend.verify_token(_token(oidc), nonce="another sign-in")


# --- claims → access, no provider needed -------------------------------------------------------------


@pytest.mark.django_db
def test_claims_grant_only_the_grantable_roles_and_one_known_tenant(settings):
    _tenants()
    settings.OIDC_CLAIM_GRANTABLE_ROLES = frozenset({"viewer", "requester"})
    access = access_from_claims({"headroom_tenant": "acme", "headroom_roles": ["requester", "operator"]})
    assert (access.tenant.slug, access.tenant_role, access.platform_roles) == ("acme", "requester", frozenset())
    assert access.ignored == frozenset({"operator"})

    settings.OIDC_ROLE_MAP = {"cap-admins": "operator", "cap-readers": "viewer"}
    settings.OIDC_TENANT_MAP = {"ACME Inc": "acme"}
    settings.OIDC_CLAIM_GRANTABLE_ROLES = frozenset({"viewer", "operator"})
    access = access_from_claims({"headroom_tenant": "ACME Inc", "headroom_roles": "cap-admins operator gateway"})
    assert (access.tenant.slug, access.tenant_role, access.platform_roles) == ("acme", "viewer", {"operator"})

    with pytest.raises(SignInRefused, match="more than one tenant"):
        access_from_claims({"headroom_tenant": ["acme", "globex"]})
    with pytest.raises(ValueError, match="gateway"):
        conf.parse_roles("viewer,gateway")
    with pytest.raises(ValueError, match="'aprover' is none of"):
        conf.parse_map("cap-approvers=aprover", values=conf.CLAIMABLE_ROLES)
