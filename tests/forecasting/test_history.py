"""Telemetry rollups → hourly demand in CU."""

from __future__ import annotations

from datetime import timedelta

from forecasting import history
from telemetry.models import HourRollup
from tests.factories import ServedModelFactory
from tests.forecasting.helpers import END


def _row(hours_before_end: int, decision: str, wt: float, **kw) -> HourRollup:
    base = {"tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved"}
    return HourRollup(bucket=END - timedelta(hours=hours_before_end), decision=decision, estimated_wt=wt, **(base | kw))


def test_arrived_demand_is_admitted_plus_throttled_in_cu(db):
    ServedModelFactory()  # R = 1000 wt/s per CU
    HourRollup.objects.bulk_create(
        [
            _row(3, "admit", 3_600_000),  # 1,000 wt/s → 1 CU
            _row(3, "throttle", 1_800_000, reason="QUOTA_EXCEEDED"),  # + 0.5 CU that arrived but was refused
            _row(3, "complete", 9_999_999),  # settlements are not arrivals
            _row(1, "admit", 7_200_000, traffic_class="shared"),  # classes add up: 2 CU
            _row(2, "admit", 3_600_000, model="not-in-catalogue"),  # no R, no CU
        ]
    )
    series = history.demand_series(start=END - timedelta(days=1), end=END)
    assert [(s.key, s.start, list(s.values)) for s in series] == [
        (("acme", "llama-test", "us-test"), END - timedelta(hours=3), [1.5, 0.0, 2.0])
    ]


def test_hourly_usage_counts_output_and_slo_from_settlements(db):
    HourRollup.objects.bulk_create(
        [
            _row(1, "complete", 0, output_tokens=500, slo_met=9, slo_total=10),
            _row(1, "admit", 1000),
            _row(1, "throttle", 250, reason="QUOTA_EXCEEDED"),
        ]
    )
    usage = history.hourly_usage(start=END - timedelta(hours=2), end=END)
    assert [(u.model, u.hour, u.output_tokens, u.slo_met, u.slo_total, u.arrived_wt) for u in usage] == [
        ("llama-test", END - timedelta(hours=1), 500, 9, 10, 1250.0)
    ]
