"""One rule for "a person's page" (entitlements.roles.is_person), at every site that checks it.

A gateway-only account and a signed-in account with no role are refused everywhere; a member, an
operator and an operator who also holds the gateway role are let in everywhere. Each site keeps
its own refusal status (the sizing page hides itself with a 404). Before the one helper the
intake pages refused a role-less account while the sizing and token pages let it in."""

import pytest

from tests import factories as f
from tests.clients import api_client, web_client

# (how the site is reached, path, status when refused)
SITES = [
    ("web", "/launch/", 403),
    ("web", "/sizing/", 404),
    ("web", "/tokens/", 403),
    ("api", "/api/v1/catalogue/models", 403),
    ("api", "/api/v1/traces", 403),
]


@pytest.fixture
def personas(fleet):
    return {
        "gateway only": f.platform_user("gw", "gateway"),
        "no role": f.UserFactory(username="nobody"),
        "viewer": f.member("vi", fleet.acme, "viewer"),
        "operator": fleet.operator,
        "operator and gateway": f.platform_user("opgw", "operator", "gateway"),
    }


REFUSED = ("gateway only", "no role")
PERMITTED = ("viewer", "operator", "operator and gateway")


@pytest.mark.parametrize(("how", "path", "refused_status"), SITES)
def test_each_site_refuses_and_permits_the_same_personas(personas, how, path, refused_status):
    client = web_client if how == "web" else api_client
    for name in REFUSED:
        assert client(personas[name]).get(path).status_code == refused_status, name
    for name in PERMITTED:
        # 200, or the staff's redirect from /launch/ to their queue: past the person check.
        assert client(personas[name]).get(path).status_code in (200, 302), name
