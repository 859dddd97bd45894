"""Metrics read from the database at scrape time, so every web process reports the same totals."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Max, Sum
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from entitlements.reasons import REASONS
from telemetry.models import DayRollup, MinuteRollup, PrometheusSource


class TelemetryCollector(Collector):
    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        decisions = CounterMetricFamily(
            "headroom_admission_decisions",
            "Admission decisions ingested, by decision and reason (from the day rollups)",
            labels=["decision", "reason", "responsible"],
        )
        rows = DayRollup.objects.values("decision", "reason").annotate(n=Sum("requests")).order_by("decision", "reason")
        for r in rows:
            responsible = REASONS[r["reason"]].responsible if r["reason"] in REASONS else ""
            decisions.add_metric([r["decision"], r["reason"], responsible], r["n"])
        yield decisions

        now = timezone.now()
        newest = MinuteRollup.objects.aggregate(bucket=Max("bucket"))["bucket"]  # indexed; events are not
        fresh = GaugeMetricFamily(
            "headroom_telemetry_newest_minute_age_seconds",
            "Seconds since the start of the newest minute that has ingested events",
        )
        if newest is not None:
            fresh.add_metric([], (now - newest).total_seconds())
        yield fresh

        pulled = GaugeMetricFamily(
            "headroom_prometheus_pull_age_seconds",
            "Seconds since a Prometheus source was last pulled",
            labels=["source"],
        )
        took = GaugeMetricFamily(
            "headroom_prometheus_pull_duration_seconds", "Duration of the last pull of a source", labels=["source"]
        )
        for name, last, dur in PrometheusSource.objects.values_list("name", "last_pulled_at", "last_duration_s"):
            if last is not None:
                pulled.add_metric([name], (now - last).total_seconds())
            if dur is not None:
                took.add_metric([name], dur)
        yield pulled
        yield took


DB_REGISTRY = CollectorRegistry(auto_describe=False)
DB_REGISTRY.register(TelemetryCollector())
