import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from entitlements import token_services
from entitlements.models import ApiToken
from entitlements.models.tenancy import hash_key
from tests.admission.sinks import memory_store, sink  # noqa: F401 - fixtures for the gateway path
from tests.admission.world import body, build_world
from tests.clients import web_client
from tests.factories import platform_user


def test_token_auth_and_revoked_token_is_401(people, fleet):
    _, key = ApiToken.issue(people["member"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/catalogue/models").status_code == 200
    ApiToken.objects.update(revoked_at=timezone.now())
    response = client.get("/api/v1/catalogue/models")
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "invalid or revoked token"


def test_gateway_token_reaches_the_snapshot_only(people, fleet):
    _, key = ApiToken.issue(people["gateway"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/entitlements/snapshot").status_code == 200
    assert client.get("/api/v1/catalogue/models").status_code == 403
    assert client.get("/api/v1/entitlements").status_code == 403


def test_unknown_token_is_401(fleet):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-key")
    assert client.get("/api/v1/pools").status_code == 401


def test_create_api_token_prints_a_working_key(people, fleet):
    out = StringIO()
    call_command("create_api_token", "appr", "--name", "ci", stdout=out)
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user=people["approver"])
    assert (token.name, token.key_hash, token.prefix) == ("ci", hash_key(key), key[:8])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/pools").json()["count"] == 2


def test_create_api_token_unknown_user(db):
    with pytest.raises(CommandError, match="no user named 'ghost'"):
        call_command("create_api_token", "ghost", stdout=StringIO())
    assert ApiToken.objects.count() == 0


# Self-service tokens (issue 13, item 4) ----------------------------------------------------------


def _bearer(key: str) -> APIClient:
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return c


def _key_in(page: bytes) -> str:
    m = re.search(rb"<pre><code>([A-Za-z0-9_\-]{40})</code></pre>", page)
    return m.group(1).decode() if m else ""


def test_a_member_creates_a_token_in_the_portal_and_sees_the_key_once(people, fleet):
    client = web_client(people["member"])
    form = {"name": "notebook", "scope": "read", "tenant": "acme", "expires_in_days": "30"}
    resp = client.post("/tokens/", form)
    # POST-redirect-GET: the key reaches the one GET after the create through the session.
    assert (resp.status_code, resp["Location"]) == (302, "/tokens/")
    assert _key_in(resp.content) == ""
    shown = client.get("/tokens/")
    assert shown["Cache-Control"] == "no-store"
    key = _key_in(shown.content)
    token = ApiToken.objects.get(user=people["member"])
    assert (token.name, token.scope, token.tenant, token.key_hash) == ("notebook", "read", fleet.acme, hash_key(key))
    assert timedelta(days=29, hours=23) < token.expires_at - timezone.now() <= timedelta(days=30)
    again = client.get("/tokens/")  # a reload: the key is gone and no second token is filed
    assert key not in again.content.decode() and token.prefix in again.content.decode()
    assert ApiToken.objects.filter(user=people["member"]).count() == 1
    assert _bearer(key).get("/api/v1/entitlements").status_code == 200


@pytest.mark.parametrize(
    "form,field",
    [
        ({"name": "", "scope": "read"}, "name"),
        ({"name": "x", "scope": "root"}, "scope"),
        ({"name": "x", "scope": "read", "expires_in_days": "0"}, "expires_in_days"),
        ({"name": "x", "scope": "read", "tenant": "globex"}, "tenant"),
        ({"name": "x", "scope": "gateway"}, "scope"),
    ],
)
def test_bad_token_input_is_a_400_naming_the_field(people, fleet, form, field):
    resp = web_client(people["member"]).post("/tokens/", form)
    assert resp.status_code == 400
    assert field in resp.context["form"].errors
    assert ApiToken.objects.count() == 0


def test_revoking_in_the_portal_is_immediate_and_only_for_the_owner(people, fleet, django_capture_on_commit_callbacks):
    token, key = ApiToken.issue(people["member"], name="ci")
    c = _bearer(key)
    assert c.get("/api/v1/entitlements").status_code == 200
    assert web_client(people["outsider"]).post("/tokens/revoke", {"token": token.pk}).status_code == 404
    assert c.get("/api/v1/entitlements").status_code == 200
    member = web_client(people["member"])
    # The list's Revoke asks first: a confirmation page, and the token still works.
    ask = member.post("/tokens/revoke", {"token": token.pk})
    assert ask.status_code == 200 and b'name="confirm" value="yes"' in ask.content
    assert c.get("/api/v1/entitlements").status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        done = member.post("/tokens/revoke", {"token": token.pk, "confirm": "yes"})
    assert (done.status_code, done["Location"]) == (302, "/tokens/")
    assert c.get("/api/v1/entitlements").status_code == 401


@pytest.mark.usefixtures("memory_store", "sink")
def test_revocation_reaches_the_gateway_fast_path_cache(fleet, django_capture_on_commit_callbacks):
    w = build_world(fleet)
    gw_user = ApiToken.objects.get(user__username="gw").user
    token, key = token_services.token_create(actor=gw_user, name="litellm", scope="gateway")
    c = _bearer(key)
    assert (
        c.post(
            "/api/v1/admission/reserve", body("acme", "reserved", "r-1", prompt=10, out=10), format="json"
        ).status_code
        == 200
    )
    assert (
        c.post(
            "/api/v1/admission/reserve", body("acme", "reserved", "r-2", prompt=10, out=10), format="json"
        ).status_code
        == 200
    )
    with django_capture_on_commit_callbacks(execute=True):
        token_services.token_revoke(actor=gw_user, token=token)
    # The cached key is dropped because the shared revocation epoch moved (no per-process reset exists).
    resp = c.post("/api/v1/admission/reserve", body("acme", "reserved", "r-3", prompt=10, out=10), format="json")
    assert resp.status_code == 401
    assert (
        w.gateway.post(
            "/api/v1/admission/reserve", body("acme", "reserved", "r-4", prompt=10, out=10), format="json"
        ).status_code
        == 200
    )


@pytest.mark.usefixtures("memory_store", "sink")
def test_read_only_tokens_refuse_writes_also_on_the_fast_path(fleet):
    build_world(fleet)
    gw_user = ApiToken.objects.get(user__username="gw").user
    _, key = token_services.token_create(actor=gw_user, name="ro", scope="read")
    c = _bearer(key)
    assert c.get("/api/v1/entitlements/snapshot").status_code == 200
    # A GET on the serving path verifies the key and caches it (then answers 405): the fast path
    # must still refuse the read-only token's POST.
    assert c.get("/api/v1/admission/reserve").status_code == 405
    resp = c.post("/api/v1/admission/reserve", body("acme", "reserved", "ro-1", prompt=10, out=10), format="json")
    assert (resp.status_code, resp.json()["error"]["message"]) == (403, "this token is read-only")


def test_read_only_person_token_refused_on_api_writes(people, fleet):
    _, key = ApiToken.issue(people["teammate"], scope="read")
    c = _bearer(key)
    assert c.get("/api/v1/launch-requests").status_code == 200
    assert c.post("/api/v1/launch-requests", {}, format="json").status_code == 403


def test_gateway_scope_only_on_gateway_endpoints(fleet):
    both = platform_user("gw-op", "gateway", "operator")
    _, full = ApiToken.issue(both, scope="full")
    _, gw = ApiToken.issue(both, scope="gateway")
    assert _bearer(full).get("/api/v1/pools").status_code == 200
    assert _bearer(gw).get("/api/v1/pools").status_code == 403
    assert _bearer(gw).get("/api/v1/entitlements/snapshot").status_code == 200


def test_a_tenant_scoped_token_sees_that_tenant_only(people, fleet):
    from entitlements.services import entitlement_grant
    from tests import factories as f

    for tenant in (fleet.acme, fleet.globex):
        entitlement_grant(actor=fleet.operator, reason="t", **f.grant_kwargs(fleet.pool_a, tenant, "1"))
    _, key = ApiToken.issue(fleet.operator, tenant=fleet.acme)
    c = _bearer(key)
    assert {e["tenant"] for e in c.get("/api/v1/entitlements").json()["results"]} == {"acme"}
    assert c.get("/api/v1/pools").status_code == 403


def test_expired_tokens_are_refused(people, fleet):
    _, key = ApiToken.issue(people["member"], expires_at=timezone.now() - timedelta(seconds=1))
    assert _bearer(key).get("/api/v1/entitlements").status_code == 401


def test_last_used_is_written_at_most_once_a_minute(people, fleet, django_assert_num_queries):
    token, key = ApiToken.issue(people["member"])
    c = _bearer(key)
    c.get("/api/v1/catalogue/models")
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    c.get("/api/v1/catalogue/models")
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(minutes=2))
    c.get("/api/v1/catalogue/models")
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_bearer_and_token_both_work_and_other_schemes_do_not(people, fleet):
    _, key = ApiToken.issue(people["member"])
    for scheme in ("Bearer", "Token", "bearer"):
        c = APIClient()
        c.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
        assert c.get("/api/v1/catalogue/models").status_code == 200
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Basic {key}")
    assert c.get("/api/v1/catalogue/models").status_code in (401, 403)
