"""A one-model catalogue small enough to size by hand, and the people of the visibility tests.

Operating point: 10,000 output tok/s per replica of 8 × 80 GB, limits TTFT 2 s / TPOT 0.2 s, mix
300/100 → goodput (4 + 3) × 10,000 = 70,000 wt/s. KV per replica: (640 − 140) GB ÷ 327,680 B.
"""

from __future__ import annotations

from typing import Any

import pytest

from entitlements import models as m
from tests.clients import api_client
from tests.factories import AcceleratorFactory, OperatingPointFactory, TenantFactory, member, platform_user


@pytest.fixture
def catalogue(db) -> m.OperatingPoint:
    acc = AcceleratorFactory(cloud_on_demand_per_hour=2.0, cloud_reserved_per_hour=1.5, min_billing_minutes=1)
    return OperatingPointFactory(accelerator=acc)


@pytest.fixture
def people(db) -> dict[str, Any]:
    acme, globex = TenantFactory(slug="acme"), TenantFactory(slug="globex")
    return {
        "member": member("ann", acme, "requester"),
        "teammate": member("bob", acme, "viewer"),
        "outsider": member("olga", globex, "requester"),
        "operator": platform_user("opal", "operator"),
        "gateway": platform_user("gw", "gateway"),
    }


@pytest.fixture
def api(people):
    return lambda who: api_client(people[who])


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
