"""A gateway's access narrowed is honoured on its very next reserve, not after the token cache
(ADMISSION_AUTH_CACHE_S): role removal and deactivation bump the token epoch like a revocation
(entitlements.epoch_signals, docs/serving-path-faults.md)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from entitlements import role_services, token_services
from entitlements.models import ApiToken, PlatformRole
from tests import factories as f
from tests.admission.sinks import memory_store, sink  # noqa: F401 - fixtures for the gateway path
from tests.admission.world import body, build_world

RESERVE = "/api/v1/admission/reserve"


def _gateway(fleet):
    build_world(fleet)
    gw = ApiToken.objects.get(user__username="gw").user
    _, key = token_services.token_create(actor=gw, name="litellm", scope="gateway")
    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    for i in range(2):  # verified once, then served from the cache (the fast path)
        assert c.post(RESERVE, body("acme", "reserved", f"ok-{i}", prompt=10, out=10), format="json").status_code == 200
    return gw, c


@pytest.mark.usefixtures("memory_store", "sink")
def test_removing_the_gateway_role_refuses_the_next_reserve(fleet, django_capture_on_commit_callbacks):
    gw, c = _gateway(fleet)
    root = f.UserFactory(username="root", is_superuser=True)
    with django_capture_on_commit_callbacks(execute=True):
        role_services.platform_role_remove(actor=root, row=PlatformRole.objects.get(user=gw, role="gateway"),
                                           reason="gateway retired")  # fmt: skip
    resp = c.post(RESERVE, body("acme", "reserved", "after", prompt=10, out=10), format="json")
    assert resp.status_code == 403


@pytest.mark.usefixtures("memory_store", "sink")
def test_deactivating_the_gateway_user_refuses_the_next_reserve(fleet, django_capture_on_commit_callbacks):
    gw, c = _gateway(fleet)
    with django_capture_on_commit_callbacks(execute=True):
        gw.is_active = False
        gw.save(update_fields=["is_active"])
    assert c.post(RESERVE, body("acme", "reserved", "after", prompt=10, out=10), format="json").status_code == 401
