"""factory_boy factories for forecasting's models: a finished run, its series and pool demand, supply orders.

Hourly figures are flat at `level` CU (×1.2 upside, ×1.5 stress, ×1.4 P99) over two weeks, weekly
peaks over 26 weeks: enough for every page and API that reads a run, with numbers easy to check.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

import factory

from forecasting.models import ForecastRun, ForecastSeries, PoolDemand, SupplyOrder

START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday at midnight: the first forecast hour
SCENARIOS = (("expected", 1.0), ("upside", 1.2), ("stress", 1.5))


class ForecastRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ForecastRun

    status = ForecastRun.Status.SUCCEEDED
    progress = 100
    attempts = 1
    results_written = 1
    series_count = 0
    finished_at = START


class ForecastSeriesFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ForecastSeries

    class Params:
        level = 10.0

    run = factory.SubFactory(ForecastRunFactory)
    tenant = None
    tenant_slug = factory.LazyAttribute(lambda o: o.tenant.slug if o.tenant else "acme")
    model = "llama-test"
    region = "us-test"
    method = "mstl"
    history_hours = 504
    start = START
    history = factory.LazyAttribute(lambda o: [o.level] * 168)
    hourly = factory.LazyAttribute(lambda o: {k: [o.level * f] * 336 for k, f in (*SCENARIOS, ("p99", 1.4))})
    weekly = factory.LazyAttribute(
        lambda o: {f"{k}_peak": [o.level * f] * 26 for k, f in SCENARIOS} | {"expected_mean": [o.level] * 26}
    )
    error_metric = "wape"
    candidates = factory.LazyFunction(
        lambda: [
            {"method": "naive_daily", "selection_error": 0.09, "holdout_error": 0.08},
            {"method": "naive_weekly", "selection_error": 0.06, "holdout_error": 0.07},
            {"method": "mstl", "selection_error": 0.04, "holdout_error": 0.05},
        ]
    )
    holdout_error = 0.05
    coverage = factory.LazyFunction(lambda: {"p50": 0.52, "p90": 0.88, "p99": 0.99})


class PoolDemandFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PoolDemand

    class Params:
        level = 20.0

    run = factory.SubFactory(ForecastRunFactory)
    pool = None  # required: tests.factories.make_pool or build_fleet's
    start = START
    tenants = factory.LazyFunction(lambda: {"acme": 1.0})
    hourly = factory.LazyAttribute(lambda o: {k: [o.level * f] * (26 * 168) for k, f in SCENARIOS})


class SupplyOrderFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SupplyOrder

    pool = None  # required
    replicas = 2
    arrival_date = date(2026, 3, 1)
