"""Forecast accuracy: every past forecast series against the demand that then arrived (issue 17.2)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from forecasting.models import ForecastRun, ForecastSeries
from reconciliation.models import ForecastAccuracy
from reconciliation.services import forecast_accuracy
from telemetry.rollups import rollups_add
from tests.reconciliation.conftest import now_hour

H = timedelta(hours=1)


@pytest.mark.django_db
def test_realised_demand_against_p50_and_p90(fleet):
    now = now_hour()
    start = now - 48 * H
    run = ForecastRun.objects.create(status="succeeded")
    series = ForecastSeries.objects.create(
        run=run, tenant_slug="acme", model="llama-test", region="us-test", method="naive_daily", history_hours=336,
        start=start, hourly={"expected": [1.0] * 336, "upside": [2.0] * 336},
    )  # fmt: skip
    # arrived: 1.5 CU the first day, 0.5 CU the second (R = 1000 wt/s: 1 CU-hour = 3,600,000 wt)
    rows = []
    for i in range(48):
        cu = 1.5 if i < 24 else 0.5
        rows.append({
            "ts": start + i * H, "tenant": "acme", "project": "", "model": "llama-test", "region": "us-test",
            "traffic_class": "reserved", "entitlement": None, "decision": "admit", "reason": "", "source_kind": "",
            "estimated_wt": cu * 3_600_000, "actual_wt": None, "prompt_tokens": 10, "cached_prompt_tokens": 0,
            "output_tokens": 0, "ttft_ms": None, "e2e_ms": None, "slo_met": None, "status": "", "in_flight": None,
        })  # fmt: skip
    rollups_add(rows, with_minutes=False)
    # a series of a run whose hours have not come yet is not scored
    ForecastSeries.objects.create(run=ForecastRun.objects.create(), tenant_slug="acme", model="llama-test",
                                  region="us-test", method="naive_daily", history_hours=1, start=now + H,
                                  hourly={"expected": [1.0], "upside": [1.0]})  # fmt: skip
    assert forecast_accuracy(now=now) == 1
    a = ForecastAccuracy.objects.get(series=series)
    assert a.hours == 48
    assert a.realised_mean_cu == pytest.approx(1.0)
    assert (a.p50_mean_cu, a.p90_mean_cu) == (1.0, 2.0)
    assert a.share_above_p50 == 0.5  # the first day
    assert a.share_above_p90 == 0.0
    assert a.wape_p50 == pytest.approx(0.5)  # Σ|r − 1| = 48 × 0.5 over Σ r = 48
