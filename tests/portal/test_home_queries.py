"""The tenant home reads its used ÷ bought meters in grouped queries (issue 28.10): the number of queries
does not grow with the tenant's entitlements, budgets included (portal.usage_meters.usages_of)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from tests.factories import grant_kwargs, member


def _grant(fleet, n: int) -> None:
    for i in range(n):
        cls = ("reserved", "shared", "best_effort")[i % 3]
        entitlement_grant(
            **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("1"), traffic_class=cls), actor=fleet.operator, reason="t"
        )
    # Every other one has a daily budget (its own meter, read from the rollups too).
    Entitlement.objects.filter(pk__in=list(Entitlement.objects.values_list("pk", flat=True)[::2])).update(
        daily_budget=10**9, budget_unit="wt"
    )


def _queries(client: Client) -> int:
    cache.clear()  # the meters' own reads, not a cached answer (portal.usage_meters.tenant_usages)
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/").status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.django_db
def test_tenant_home_query_count_is_the_same_for_two_and_six_entitlements(fleet):
    client = Client()
    client.force_login(member("viewer", fleet.acme, "viewer"))
    _grant(fleet, 2)
    _queries(client)  # the session and the content types are read once per process
    two = _queries(client)
    _grant(fleet, 4)
    assert Entitlement.objects.filter(tenant=fleet.acme).count() == 6
    six = _queries(client)
    assert six == two, f"{two} queries for 2 entitlements, {six} for 6"
