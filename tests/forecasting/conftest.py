"""People and a finished run with one series per tenant, written directly (no forecasting needed)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from entitlements import models as m
from forecasting.models import ForecastRun, ForecastSeries, PoolDemand
from tests.api_people import client_for, people  # noqa: F401  (shared people and clients)
from tests.forecasting.helpers import END


@pytest.fixture
def api_for(client_for: Callable[[str], APIClient]) -> Callable[[str], APIClient]:  # noqa: F811
    return client_for


def _series(run: ForecastRun, tenant: m.Tenant, level: float) -> ForecastSeries:
    hourly = {k: [level * f] * 336 for k, f in (("expected", 1.0), ("upside", 1.2), ("stress", 1.5), ("p99", 1.4))}
    weekly = {f"{k}_peak": [level * f] * 26 for k, f in (("expected", 1.0), ("upside", 1.2), ("stress", 1.5))}
    return ForecastSeries.objects.create(
        run=run,
        tenant_slug=tenant.slug,
        tenant=tenant,
        model="llama-test",
        region="us-test",
        method="mstl",
        history_hours=504,
        start=END,
        history=[level] * 168,
        hourly=hourly,
        weekly=weekly | {"expected_mean": [level] * 26},
        error_metric="wape",
        candidates=[
            {"method": "naive_daily", "selection_error": 0.09, "holdout_error": 0.08},
            {"method": "naive_weekly", "selection_error": 0.06, "holdout_error": 0.07},
            {"method": "mstl", "selection_error": 0.04, "holdout_error": 0.05},
        ],
        holdout_error=0.05,
        coverage={"p50": 0.52, "p90": 0.88, "p99": 0.99},
    )


@pytest.fixture
def finished(fleet) -> ForecastRun:
    run = ForecastRun.objects.create(
        status="succeeded", progress=100, attempts=1, results_written=1, series_count=2, finished_at=END
    )
    _series(run, fleet.acme, 10.0)
    _series(run, fleet.globex, 30.0)
    for pool in (fleet.pool_a, fleet.pool_b):
        PoolDemand.objects.create(
            run=run,
            pool=pool,
            start=END,
            tenants={"acme": 0.25, "globex": 0.75},
            hourly={k: [20.0 * f] * (26 * 168) for k, f in (("expected", 1.0), ("upside", 1.2), ("stress", 1.5))},
        )
    return run
