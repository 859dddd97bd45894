"""The order-by rule reads every scenario and case planning shows (issue 28.8): a pool short only in
the upside or stress scenario is late in the inbox as on planning, and both count the same pools."""

from __future__ import annotations

from django.utils import timezone

from alerts.evaluation import alert_rules_evaluate
from alerts.models import AlertEpisode, Notification
from forecasting.models import ForecastRun, PoolDemand
from tests.alerts.conftest import rule

WEEKS = 4  # pool-a and pool-b each deliver 280 CU; a 12-week lead time puts any shortfall's order-by in the past


def _demand(run, pool, *, expected: float, upside: float, stress: float) -> None:
    hourly = {k: [v] * (WEEKS * 168) for k, v in (("expected", expected), ("upside", upside), ("stress", stress))}
    start = timezone.now().replace(minute=0, second=0, microsecond=0)
    PoolDemand.objects.create(run=run, pool=pool, start=start, hourly=hourly, tenants={"acme": 1.0})


def _late_on_planning(client, user) -> set[str]:
    client.force_login(user)
    resp = client.get("/planning/")
    assert resp.status_code == 200
    return {row["pool"] for row in resp.context["actions"] if row["late"]}


def test_a_pool_short_only_under_stress_is_late_in_the_inbox_and_on_planning(client, fleet, people):
    rule(name="order-by", kind="supply_gap_order_by_within", threshold=14, channels=[])
    run = ForecastRun.objects.create(status="succeeded", finished_at=timezone.now())
    _demand(run, fleet.pool_a, expected=10.0, upside=10.0, stress=500.0)  # short only under stress
    _demand(run, fleet.pool_b, expected=10.0, upside=10.0, stress=10.0)  # never short

    assert alert_rules_evaluate()["opened"] == 1
    ep = AlertEpisode.objects.get(resolved_at__isnull=True)
    assert ep.subject_key == "pool:pool-a"
    assert (ep.detail["scenario"], ep.detail["late"]) == ("stress", True)
    assert "(stress, " in ep.summary and ep.summary.endswith("is late")
    assert _late_on_planning(client, people.operator) == {"pool-a"}


def test_the_inbox_and_planning_count_the_same_late_pools(client, fleet, people):
    rule(name="order-by", kind="supply_gap_order_by_within", threshold=14, channels=[])
    run = ForecastRun.objects.create(status="succeeded", finished_at=timezone.now())
    _demand(run, fleet.pool_a, expected=10.0, upside=500.0, stress=500.0)  # short from upside up
    _demand(run, fleet.pool_b, expected=500.0, upside=500.0, stress=500.0)  # short everywhere
    alert_rules_evaluate()

    late_alerts = {
        ep.detail["pool"] for ep in AlertEpisode.objects.filter(resolved_at__isnull=True) if ep.detail["late"]
    }
    assert late_alerts == _late_on_planning(client, people.operator) == {"pool-a", "pool-b"}
    # what the approver's inbox lists: one message per late pool
    titles = Notification.objects.filter(user=people.approver).values_list("title", flat=True)
    assert sorted(t.split(": ")[1] for t in titles) == ["pool-a", "pool-b"]
