"""People for the API tests (entitlements, forecasting): a member and a teammate of acme, an outsider of globex, and the
platform roles. Every client goes through DRF's force_authenticate except the token tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.clients import api_client
from tests.factories import member, platform_user


@pytest.fixture
def people(fleet) -> dict[str, Any]:
    return {
        "member": member("ann", fleet.acme, "viewer"),
        "teammate": member("bob", fleet.acme, "requester"),
        "outsider": member("olga", fleet.globex, "requester"),
        "approver": platform_user("appr", "approver"),
        "operator": fleet.operator,
        "gateway": platform_user("gw", "gateway"),
    }


@pytest.fixture
def client_for(people) -> Callable[[str], APIClient]:
    return lambda who: api_client(people[who])
