"""A team that migrates (issue 47): 90 days of hourly history imported for a new tenant give it a forecast
before a single event has arrived, and reconciliation's usage reads the same rollups."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.db.models import Q

from forecasting import history, services
from forecasting.models import ForecastRun, ForecastSeries
from telemetry.history_import import import_history
from telemetry.models import AdmissionEvent, HourRollup
from telemetry.usage import sums
from tests.factories import TenantFactory
from tests.forecasting.helpers import END, cycles_cu

DAYS = 90


def _rows(tenant: str, cu: np.ndarray) -> list[dict]:
    """Hourly totals as another gateway exports them: requests of 2,000 prompt and 500 output tokens
    (4,000 weighted tokens with w_out 4), a tenth of them throttled."""
    start = END - timedelta(hours=len(cu))
    rows = []
    for i, v in enumerate(cu):
        wt = float(v) * 1000 * 3600  # CU × R (1,000 wt/s per CU) × an hour
        requests = max(round(wt / 4000), 10)  # every request arrived: demand = requests × 4,000 wt
        throttled = requests // 10
        served = requests - throttled
        rows.append(
            {
                "hour": (start + timedelta(hours=i)).isoformat(),
                "tenant": tenant,
                "model": "llama-test",
                "region": "us-test",
                "traffic_class": "reserved",
                "requests": requests,
                "prompt_tokens": 2000 * served,
                "output_tokens": 500 * served,
                "throttled": throttled,
            }
        )
    return rows


@pytest.mark.slow
def test_ninety_days_of_imported_history_give_a_new_tenant_a_forecast_with_no_events(
    fleet, django_capture_on_commit_callbacks
):
    TenantFactory(slug="migrant")
    cu = cycles_cu(DAYS * 24, base=30, seed=7)
    result = import_history(_rows("migrant", cu), now=END + timedelta(minutes=5))
    assert (result.accepted, result.errors) == (DAYS * 24, [])
    assert AdmissionEvent.objects.count() == 0
    # The history the forecast reads is the import's: admitted + throttled demand in CU, hour by hour
    (s,) = history.demand_series(start=END - timedelta(days=DAYS), end=END)
    assert s.key == ("migrant", "llama-test", "us-test") and len(s.values) == DAYS * 24
    assert np.allclose(s.values, cu, rtol=0.05)
    with django_capture_on_commit_callbacks(execute=True):  # Celery runs inline in the embedded default
        run = services.forecast_run_request(parameters={"end": END.isoformat(), "lookback_days": DAYS})
    run = ForecastRun.objects.get(pk=run.pk)
    assert run.status == "succeeded", run.error
    f = ForecastSeries.objects.get(run=run, tenant_slug="migrant")
    assert f.history_hours == DAYS * 24
    # 12 whole weeks score the 1- and 4-week horizons; the forecast holds the imported level
    assert f.selection["horizons"] == [1, 4]
    assert abs(np.mean(f.weekly["expected_mean"][:4]) / cu[-4 * 168 :].mean() - 1) < 0.1
    assert AdmissionEvent.objects.count() == 0


def test_usage_reads_imported_hours_like_any_rollup(fleet):
    TenantFactory(slug="migrant")
    cu = cycles_cu(48, base=30, seed=7)
    rows = _rows("migrant", cu)
    import_history(rows, now=END + timedelta(minutes=5))
    stored = sum(HourRollup.objects.filter(decision="complete").values_list("requests", flat=True))
    # every served request of every row is one completion, no more and no less
    assert stored == sum(r["requests"] - r["throttled"] for r in rows)
    # hour and day rollups alike (a statement reads days for whole days, hours at the edges)
    for level in ("hour", "day"):
        (got,) = sums(
            level, Q(tenant="migrant"), END - timedelta(days=2), END, by=(), fields=("requests",), decision="complete"
        )
        assert got["requests"] == stored
