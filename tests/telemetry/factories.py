"""factory_boy factories for telemetry's models that tests may write directly: fleet samples,
Prometheus sources, dead letters. Admission events and rollups are written through ingest
(`telemetry.services.ingest_events` with tests.telemetry.helpers.event), which keeps the dedup
keys and rollups in step; a row written around it would not be counted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import factory

from telemetry.models import DeadLetter, FleetSample, PrometheusSource

T0 = datetime(2026, 1, 5, tzinfo=UTC)


class FleetSampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = FleetSample

    pool = None  # required: tests.factories.make_pool or build_fleet's
    ts = factory.Sequence(lambda n: T0 + timedelta(seconds=15 * n))
    source = "gateway"
    replicas_healthy = 4
    replicas_total = 4
    accelerator_util = 0.6
    kv_cache_usage = 0.5
    requests_running = 12.0
    requests_waiting = 0.0


class PrometheusSourceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PrometheusSource

    name = factory.Sequence(lambda n: f"prom-{n}")
    base_url = "http://127.0.0.1:9090"


class DeadLetterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DeadLetter

    stage = "fold"
    key = factory.Sequence(lambda n: f"2026-01-05T{n % 24:02d}:00:00Z")
    error = "OperationalError: database is locked"
    payload = factory.LazyAttribute(lambda o: {"hour": o.key})
