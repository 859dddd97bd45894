"""A one-model catalogue small enough to size by hand, and the people of the visibility tests.

Operating point: 10,000 output tok/s per replica of 8 × 80 GB, limits TTFT 2 s / TPOT 0.2 s, mix
300/100 → goodput (4 + 3) × 10,000 = 70,000 wt/s. KV per replica: (640 − 140) GB ÷ 327,680 B.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from entitlements import models as m
from tests.factories import AcceleratorFactory, OperatingPointFactory, TenantFactory, UserFactory


@pytest.fixture
def catalogue(db) -> m.OperatingPoint:
    acc = AcceleratorFactory(cloud_on_demand_per_hour=2.0, cloud_reserved_per_hour=1.5, min_billing_minutes=1)
    return OperatingPointFactory(accelerator=acc)


def _member(username: str, tenant: m.Tenant, role: str) -> Any:
    user = UserFactory(username=username)
    m.Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


def _platform(username: str, role: str) -> Any:
    user = UserFactory(username=username)
    m.PlatformRole.objects.create(user=user, role=role)
    return user


@pytest.fixture
def people(db) -> dict[str, Any]:
    acme, globex = TenantFactory(slug="acme"), TenantFactory(slug="globex")
    return {
        "member": _member("ann", acme, "requester"),
        "teammate": _member("bob", acme, "viewer"),
        "outsider": _member("olga", globex, "requester"),
        "operator": _platform("opal", "operator"),
        "gateway": _platform("gw", "gateway"),
    }


@pytest.fixture
def api(people):
    def make(who: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(people[who])
        return client

    return make


def sizing_body(**over: Any) -> dict[str, Any]:
    """100 req/s of 300 prompt + 100 output tokens, every quantile equal (a fixed-length class)."""
    body: dict[str, Any] = {
        "model": "llama-test",
        "arrival_rate_rps": 100,
        "prompt_tokens": {"mean": 300, "p50": 300, "p95": 300, "p99": 300},
        "output_tokens": {"mean": 100, "p50": 100, "p95": 100, "p99": 100},
        "slo": {"ttft_p99_s": 2, "tpot_p99_s": 0.2},
        "failure_policy": "zone",
        "zones": 3,
    }
    body.update(over)
    return body
