"""Synthetic rollups for one entitlement over the reconciliation window: hour by hour, written through
the rollups' own code (telemetry.rollups.rollups_add), no events stored."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from entitlements.services import entitlement_grant
from telemetry.rollups import rollups_add
from tests.factories import grant_kwargs

H = timedelta(hours=1)


def now_hour():
    return timezone.now().replace(minute=0, second=0, microsecond=0)


def window() -> tuple[Any, Any]:
    end = now_hour()
    return end - timedelta(days=14), end


def row(ent: Any, ts: Any, decision: str, **kw: Any) -> dict[str, Any]:
    r = {
        "ts": ts, "tenant": ent.tenant.slug, "project": "", "model": ent.model.slug, "region": ent.region.slug,
        "traffic_class": ent.traffic_class_id, "entitlement": ent.uuid, "decision": decision, "reason": "",
        "source_kind": "", "estimated_wt": 0.0, "actual_wt": None, "prompt_tokens": 0, "cached_prompt_tokens": 0,
        "output_tokens": 0, "ttft_ms": None, "e2e_ms": None, "slo_met": None, "status": "", "in_flight": None,
    }  # fmt: skip
    r.update(kw)
    return r


def every_hour(ent: Any, make: Any, *, with_minutes: bool = False) -> None:
    """make(hour_index, ts) → rows for that hour of the window; added to hour and day rollups."""
    start, end = window()
    rows = []
    for i in range(int((end - start) / H)):
        rows += make(i, start + i * H + timedelta(minutes=5))
    rollups_add(rows, with_minutes=with_minutes)


@pytest.fixture
def grant(fleet):
    def make(cu: str = "2", *, pool=None, tenant=None, traffic_class: str = "reserved", **extra: Any):
        kw = grant_kwargs(
            pool or fleet.pool_a, tenant or fleet.acme, Decimal(cu), traffic_class=traffic_class,
            start=now_hour() - timedelta(days=20), days=60,
        )  # fmt: skip
        return entitlement_grant(**{**kw, **extra}, actor=fleet.operator, reason="test")

    return make
