"""People, rules and telemetry for the alert tests.

Fleet (tests.factories.build_fleet): model llama-test (R 1000 wt/s), region us-test, pool-a and
pool-b, tenants acme and globex. Alerts for acme go to acme's members; pool and platform alerts
go to approvers and operators.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from alerts.models import AlertRule
from telemetry.ingest import ingest_events
from tests import factories as f


@dataclass
class People:
    viewer: Any
    requester: Any
    outsider: Any
    approver: Any
    operator: Any


@pytest.fixture
def people(fleet):
    return People(
        viewer=f.member("acme-view", fleet.acme, "viewer"),
        requester=f.member("acme-req", fleet.acme, "requester"),
        outsider=f.member("globex-req", fleet.globex, "requester"),
        approver=f.platform_user("appr", "approver"),
        operator=fleet.operator,
    )


def traffic(
    at, *, tenant: str = "acme", admits: int = 0, throttles: int = 0, reason: str = "QUOTA_EXCEEDED", tag: str = ""
) -> None:
    """Admission events through the real ingest path (validation, dedup, minute rollups)."""
    events = []
    for i in range(admits):
        events.append(_event(f"{tag}a{i}", at, tenant, decision="admit"))
    for i in range(throttles):
        events.append(_event(f"{tag}t{i}", at, tenant, decision="throttle", reason=reason))
    result = ingest_events(source="alerts-test", events=events)
    assert result.accepted == admits + throttles, result


def _event(event_id: str, at, tenant: str, **kw: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "ts": at.isoformat(),
        "tenant": tenant,
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "estimated_wt": 100,
        "prompt_tokens": 10,
        **kw,
    }


def rule(**kw: Any) -> AlertRule:
    defaults = {"name": "throttles", "scope": "platform", "kind": "tenant_throttles_over", "threshold": 10}
    return AlertRule.objects.create(**{**defaults, **kw})


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def now():
    return timezone.now()
