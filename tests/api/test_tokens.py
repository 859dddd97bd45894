from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from rest_framework.test import APIClient

from entitlements.models import ApiToken
from entitlements.models.tenancy import hash_key


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
