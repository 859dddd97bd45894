"""Each rule kind reads the data it names: rollups for use, throttles, latency and envelope; the
newest forecast's supply gap for order-by dates; forecast runs for failures."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from django.utils import timezone

from alerts.evaluation import alert_rules_evaluate
from alerts.models import AlertEpisode
from entitlements.services import entitlement_grant
from forecasting.models import ForecastRun, PoolDemand
from telemetry.ingest import ingest_events
from tests.alerts.conftest import minutes, now, rule, traffic
from tests.capacity.test_planning import independent_share
from tests.factories import grant_kwargs


def _completes(at, n, *, ent=None, tag="c", **kw):
    events = [
        {
            "event_id": f"{tag}{i}",
            "ts": at.isoformat(),
            "tenant": "acme",
            "model": "llama-test",
            "region": "us-test",
            "traffic_class": "reserved",
            "decision": "complete",
            **({"entitlement": str(ent.uuid)} if ent else {}),
            **kw,
        }
        for i in range(n)
    ]
    assert ingest_events(source="alerts-test", events=events).accepted == n


def _open():
    return sorted(AlertEpisode.objects.filter(resolved_at__isnull=True).values_list("subject_key", "summary"))


def _grant(fleet, cu="1"):
    return entitlement_grant(actor=fleet.operator, reason="t", **grant_kwargs(fleet.pool_a, fleet.acme, cu))


def test_use_over_bought_compares_actual_wt_with_cu_times_r_times_window(fleet, people):
    ent = _grant(fleet)  # 1 CU × R 1000 wt/s × 900 s = 900,000 wt over a 15-minute window
    rule(scope="tenant", tenant=fleet.acme, kind="use_over_bought", threshold=90, window_minutes=15, channels=[])
    t = now()
    # Each request as a gateway reports it: its reservation (admitted at its estimate) and its completion.
    _completes(t - minutes(5), 10, ent=ent, decision="admit", estimated_wt=80_000, prompt_tokens=10, tag="a")
    _completes(t - minutes(5), 10, ent=ent, actual_wt=80_000, prompt_tokens=10)  # 800,000 wt = 88.9 %
    assert alert_rules_evaluate(now=t)["opened"] == 0
    _completes(t - minutes(4), 1, ent=ent, decision="admit", estimated_wt=20_000, prompt_tokens=10, tag="b")
    _completes(t - minutes(4), 1, ent=ent, actual_wt=20_000, prompt_tokens=10, tag="d")  # 820,000 + … = 91.1 %
    assert alert_rules_evaluate(now=t)["opened"] == 1
    ((key, summary),) = _open()
    assert key == f"entitlement:{ent.uuid}"
    used, advice = summary.split("; grow to ")
    assert used == "acme llama-test@us-test reserved used 91 % of its 1.000 CU over 15 min"
    # Issue 30: the alert says grow only with the planning answer's replay of the window's traffic (the
    # raw reservations, kept: ten 80,000 wt requests in one instant, one 20,000 wt a minute later; issue
    # 45: a burst is not spread over its minute), checked here independently: a 1 CU bucket (60,000 wt)
    # cannot even hold one request, and the ten together need 800,000 wt of depth.
    cu = float(advice.split(" CU:")[0])
    assert cu == 13.4
    t = np.concatenate((np.zeros(10), [60.0]))
    cost = np.array([80_000.0] * 10 + [20_000.0])
    assert independent_share(t, cost, cu) <= 0.001 < independent_share(t, cost, round(cu - 0.1, 1))
    assert (
        advice
        == f"{cu} CU: replayed 11 requests, 0 % throttled (target 0.1 %); at {cu - 0.1:.1f} CU 9.09 %; at the 1.0 CU bought 90.9 %"
    )


def test_latency_misses_count_completions_that_missed_the_slo(fleet, people):
    rule(scope="tenant", tenant=fleet.acme, kind="latency_misses", threshold=2, channels=[])
    t = now()
    _completes(t - minutes(2), 2, slo_met=False, prompt_tokens=10, tag="m")
    _completes(t - minutes(2), 5, slo_met=True, prompt_tokens=10, tag="ok")
    assert alert_rules_evaluate(now=t)["opened"] == 0  # 2 misses, not above 2
    _completes(t - minutes(1), 1, slo_met=False, prompt_tokens=10, tag="m2")
    assert alert_rules_evaluate(now=t)["opened"] == 1
    assert _open() == [
        ("acme:llama-test:us-test", "acme llama-test@us-test: 3 requests missed their latency SLO over 15 min")
    ]


def test_platform_throttles_on_a_pool_rule(fleet, people):
    rule(scope="pool", pool=fleet.pool_a, kind="platform_throttles", threshold=0, channels=[])
    t = now()
    traffic(t - minutes(2), admits=5, throttles=3, reason="QUOTA_EXCEEDED")  # the tenant's own: not counted
    assert alert_rules_evaluate(now=t)["opened"] == 0
    traffic(t - minutes(2), throttles=2, reason="PLATFORM_CAPACITY", tag="p")
    assert alert_rules_evaluate(now=t)["opened"] == 1
    assert _open() == [
        ("llama-test:us-test", "llama-test@us-test: 2 throttles the platform is responsible for over 15 min")
    ]


def test_envelope_drift_from_window_means_and_outside_envelope_throttles(fleet, people):
    ent = _grant(fleet)  # envelope: prompt p50 1000, output p50 200
    rule(scope="tenant", tenant=fleet.acme, kind="envelope_drift", threshold=150, channels=[])
    t = now()
    _completes(t - minutes(2), 4, ent=ent, prompt_tokens=1400, output_tokens=250)  # within 150 % of p50
    assert alert_rules_evaluate(now=t)["opened"] == 0
    _completes(t - minutes(2), 4, ent=ent, prompt_tokens=2600, output_tokens=250, tag="long")  # mean 2000
    assert alert_rules_evaluate(now=t)["opened"] == 1
    ((key, summary),) = _open()
    assert key == f"entitlement:{ent.uuid}"
    # Numbers grouped as on every page (the reviewer read "16000" and "11768" in alerts).
    assert summary.endswith("drifted from its envelope: mean prompt 2,000 tokens vs p50 1,000")


def test_alert_counts_read_as_words_grouped_and_pluralised():
    from alerts.conditions import _count

    assert [_count(1, "request"), _count(11768, "request")] == ["1 request", "11,768 requests"]


def test_forecast_run_failed_holds_until_a_later_run_succeeds(fleet, people):
    rule(name="forecasts", kind="forecast_run_failed", threshold=0, channels=[])
    ForecastRun.objects.create(status="failed", error="MemoryError: too big")
    assert alert_rules_evaluate()["opened"] == 1
    assert _open()[0][0] == "forecast"
    assert alert_rules_evaluate()["opened"] == 0
    ForecastRun.objects.create(status="succeeded", finished_at=timezone.now())
    assert alert_rules_evaluate()["resolved"] == 1
    assert _open() == []


def test_supply_gap_order_by_date_late(fleet, people):
    rule(scope="pool", pool=fleet.pool_a, kind="supply_gap_order_by_within", threshold=14, channels=[])
    run = ForecastRun.objects.create(status="succeeded", finished_at=timezone.now())
    weeks = 4
    hourly = {s: [500.0] * (weeks * 168) for s in ("expected", "upside", "stress")}  # 500 CU > 280 CU deliverable
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    PoolDemand.objects.create(run=run, pool=fleet.pool_a, start=start, hourly=hourly, tenants={"acme": 1.0})
    assert alert_rules_evaluate()["opened"] == 1
    ((key, summary),) = _open()
    # short from the first week; the accelerator's 12-week lead time puts the order-by date in the past
    assert key == "pool:pool-a"
    assert summary.startswith("pool-a: the order-by date for") and summary.endswith("is late")
    assert AlertEpisode.objects.get().detail["order_by"] == (start.date() - timedelta(weeks=12)).isoformat()


def test_alert_links_point_where_a_person_looks_next(fleet, people):
    from alerts.models import Notification

    ent = _grant(fleet)
    rule(scope="tenant", tenant=fleet.acme, kind="use_over_bought", threshold=1, channels=[])
    rule(name="throttles", scope="tenant", tenant=fleet.acme, kind="tenant_throttles_over", threshold=1, channels=[])
    t = now()
    _completes(t - minutes(2), 1, ent=ent, actual_wt=100_000, prompt_tokens=10)
    traffic(t - minutes(2), admits=1, throttles=1)
    alert_rules_evaluate(now=t)
    assert sorted(Notification.objects.filter(user=people.viewer).values_list("link", flat=True)) == [
        f"/entitlements/{ent.uuid}/",
        "/usage/",
    ]
