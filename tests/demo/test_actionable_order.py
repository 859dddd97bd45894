"""A fresh demo has a pool whose order arrives in time (issue 48.7): the launch approved to start in 12
weeks on the TPU pool makes it short after a zone failure from then, with the 8-week lead time to spare.
Without that grant every gap of a fresh demo starts now and every order is late."""

from __future__ import annotations

import pytest
from django.utils import timezone

from demo.fleet import load_demo
from entitlements import models as m
from forecasting import gap
from forecasting.models import ForecastRun, PoolDemand

pytestmark = pytest.mark.django_db


def test_the_tpu_pools_order_arrives_in_time():
    load_demo()
    pool = m.Pool.objects.get(slug="llama-3-8b-ap-south-tpu-v5e")
    run = ForecastRun.objects.create(status="succeeded", progress=100)
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    # No forecast demand: the committed scenario (sold entitlements) alone.
    PoolDemand.objects.create(
        run=run, pool=pool, start=start, tenants={}, hourly={k: [0.0] * (26 * 168) for k in gap.FORECAST_SCENARIOS}
    )
    _, pools = gap.supply_gap(run=run)
    (row,) = [p for p in pools if p["pool"] == pool.slug]
    short = {(s, c): g for s, cases in row["gaps"].items() for c, g in cases.items() if g["first_week"]}
    assert list(short) == [("committed", "failure")]
    g = short["committed", "failure"]
    assert g["late"] is False and g["order_by"] >= start.date()
    assert g["order"]["closes"] and g["order"]["arrives"] <= g["first_week"]
