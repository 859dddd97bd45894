"""OIDC refusals and django-axes: a refusal counts under the provider's subject once the ID token names one
(per address while it names none), never under the empty user name every OIDC callback has, so refused
identities never lock anyone else out (accounts_oidc/lockout.py). The code flow runs against the real test
provider, driven over HTTP without a browser; the failure limit is the production one."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from entitlements.models import Tenant
from tests.oidc_provider.server import PASSWORD, ProviderServer
from tests.security.oidc_setup import configured, running_provider

pytestmark = pytest.mark.slow  # a provider process for the module

LIMIT = settings.AXES_FAILURE_LIMIT
REFUSED = [f"stranger{i}" for i in range(LIMIT)]  # known to the provider; their claims grant nothing here
CLAIMS: dict[str, dict[str, Any]] = {
    "alice": {"email": "alice@acme.test", "headroom_tenant": "acme", "headroom_roles": ["requester"]},
    **{name: {"email": f"{name}@elsewhere.test", "headroom_tenant": "initech"} for name in REFUSED},
}


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory):
    yield from running_provider(tmp_path_factory, "oidc-lockout", CLAIMS)


@pytest.fixture
def oidc(settings, provider: ProviderServer, db) -> ProviderServer:
    Tenant.objects.create(slug="acme", name="Acme Corp")
    return configured(settings, provider, CLAIMS, {"viewer", "requester"})


def _callback_query(username: str, authorize_url: str) -> dict[str, str]:
    """The provider's side of the flow, as a browser would do it: its sign-in form, then its redirect back."""
    op = requests.Session()
    page = op.get(authorize_url, timeout=30)
    assert page.status_code == 200 and "op-username" in page.text, page.text[:500]
    nxt = re.search(r'name="next" value="([^"]*)"', page.text)
    assert nxt is not None
    form = {
        "username": username,
        "password": PASSWORD,
        "next": nxt.group(1).replace("&amp;", "&"),
        "csrfmiddlewaretoken": op.cookies["op_csrf"],
    }
    resp = op.post(page.url, data=form, allow_redirects=False, timeout=30)
    while resp.status_code in (301, 302, 303):
        location = urljoin(resp.url, resp.headers["Location"])
        if "/oidc/callback/" in location:
            return {k: v[0] for k, v in parse_qs(urlparse(location).query).items()}
        resp = op.get(location, allow_redirects=False, timeout=30)
    raise AssertionError(f"the provider did not send the browser back: {resp.status_code} {resp.text[:500]}")


def _sign_in(username: str, addr: str, *, code: str | None = None, nonce: str | None = None) -> tuple[int, bool]:
    """Headroom's sign-in with the provider from `addr`: (the callback's status, signed in?). `code` replaces
    the provider's code; `nonce` replaces the one this sign-in expects (so its ID token does not check out)."""
    c = Client(HTTP_HOST="127.0.0.1", REMOTE_ADDR=addr)
    start = c.get("/oidc/authenticate/")
    assert start.status_code == 302
    query = _callback_query(username, start["Location"])
    if code is not None:
        query["code"] = code
    if nonce is not None:
        session = c.session
        session["oidc_states"][query["state"]]["nonce"] = nonce
        session.save()
    back = c.get("/oidc/callback/", query)
    return back.status_code, "_auth_user_id" in c.session


def test_refused_identities_from_many_addresses_do_not_stop_a_good_one(oidc):
    for i, name in enumerate(REFUSED):
        assert _sign_in(name, f"10.8.0.{i}") == (403, False)
    assert _sign_in("alice", "10.8.1.1") == (302, True)


def test_refused_identities_from_one_address_do_not_stop_a_good_one_there(oidc):
    for name in REFUSED:
        assert _sign_in(name, "10.8.2.1") == (403, False)
    assert _sign_in("alice", "10.8.2.1") == (302, True)


def test_one_identity_refused_to_the_limit_is_paused_alone(oidc):
    for _ in range(LIMIT):
        assert _sign_in(REFUSED[0], "10.8.3.1")[1] is False
    oidc.set_claims({**CLAIMS, REFUSED[0]: CLAIMS["alice"]})  # its claims now grant a role: still paused
    assert _sign_in(REFUSED[0], "10.8.3.2") == (429, False)  # that identity, from anywhere
    assert not get_user_model().objects.filter(username=REFUSED[0]).exists()
    assert _sign_in("alice", "10.8.3.1") == (302, True)  # nobody else, not even from its address


def test_tokens_that_do_not_check_out_lock_that_address_only(oidc):
    for _ in range(LIMIT):
        assert _sign_in("alice", "10.8.4.1", nonce="another sign-in's")[1] is False  # a 403 page, the last a 429
    assert _sign_in("alice", "10.8.4.1") == (429, False)  # as wrong passwords lock the form from their address
    assert _sign_in("alice", "10.8.4.2") == (302, True)


def test_the_provider_refusing_a_code_is_not_counted(oidc):
    for _ in range(LIMIT):
        assert _sign_in("alice", "10.8.5.1", code="not-a-code") == (502, False)
    assert _sign_in("alice", "10.8.5.1") == (302, True)
