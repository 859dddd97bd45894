"""The budget_used kind (issue 23): a period budget's settled use at the threshold, again once spent,
and afresh in the next period."""

from __future__ import annotations

from datetime import timedelta

from alerts.evaluation import alert_rules_evaluate
from alerts.models import AlertEpisode
from entitlements.services import entitlement_grant
from telemetry.ingest import ingest_events
from tests.alerts.conftest import minutes, now, rule
from tests.factories import grant_kwargs


def _completes(at, wts, ent, tag):
    events = [
        {
            "event_id": f"{tag}{i}",
            "ts": at.isoformat(),
            "tenant": "acme",
            "model": "llama-test",
            "region": "us-test",
            "traffic_class": "reserved",
            "decision": "complete",
            "entitlement": str(ent.uuid),
            "actual_wt": wt,
            "prompt_tokens": 10,
        }  # fmt: skip
        for i, wt in enumerate(wts)
    ]
    assert ingest_events(source="alerts-test", events=events).accepted == len(wts)


def _open():
    return sorted(AlertEpisode.objects.filter(resolved_at__isnull=True).values_list("subject_key", "summary"))


def test_budget_used_fires_at_the_threshold_then_when_spent_and_resets_with_the_period(fleet, people):
    t = (now() - timedelta(days=1)).replace(hour=12, minute=0, second=0, microsecond=0)
    ent = entitlement_grant(
        actor=fleet.operator, reason="t", daily_budget=1000,
        **grant_kwargs(fleet.pool_a, fleet.acme, "1", start=t - timedelta(hours=2)),
    )  # fmt: skip
    rule(scope="tenant", tenant=fleet.acme, kind="budget_used", threshold=80, channels=[])
    _completes(t - minutes(30), [400, 300], ent, "a")
    assert alert_rules_evaluate(now=t)["opened"] == 0  # 70 %
    _completes(t - minutes(20), [150], ent, "b")
    assert alert_rules_evaluate(now=t)["opened"] == 1  # 85 %
    day = t.strftime("%Y%m%d")
    assert _open() == [
        (
            f"budget:{ent.uuid}:daily:{day}",
            f"acme llama-test@us-test reserved daily budget {day}: 85 % used (850 of 1,000 wt)",
        )
    ]
    _completes(t - minutes(10), [200], ent, "c")
    assert alert_rules_evaluate(now=t)["opened"] == 1  # 105 %: spent
    assert [k for k, _ in _open()] == [f"budget:{ent.uuid}:daily:{day}", f"budget:{ent.uuid}:daily:{day}:spent"]
    assert "throttled until" in _open()[1][1]
    # The next day: nothing settled yet, both resolve.
    assert alert_rules_evaluate(now=t + timedelta(days=1))["resolved"] == 2
    assert _open() == []
