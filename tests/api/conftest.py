"""People for the API tests: a member and a teammate of acme, an outsider of globex, and the
platform roles. Every client goes through DRF's force_authenticate except the token tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from entitlements import models as m
from tests.factories import UserFactory


def _member(username: str, tenant: m.Tenant, role: str) -> Any:
    user = UserFactory(username=username)
    m.Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


def _platform(username: str, role: str) -> Any:
    user = UserFactory(username=username)
    m.PlatformRole.objects.create(user=user, role=role)
    return user


@pytest.fixture
def people(fleet) -> dict[str, Any]:
    return {
        "member": _member("ann", fleet.acme, "viewer"),
        "teammate": _member("bob", fleet.acme, "requester"),
        "outsider": _member("olga", fleet.globex, "requester"),
        "approver": _platform("appr", "approver"),
        "operator": fleet.operator,
        "gateway": _platform("gw", "gateway"),
    }


@pytest.fixture
def client_for(people) -> Callable[[str], APIClient]:
    def make(who: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(people[who])
        return client

    return make
