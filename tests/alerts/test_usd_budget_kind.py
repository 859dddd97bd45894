"""$ budgets in the budget_used kind (issue 51.3): findings at 50, 80 and 100 % of the month's $,
charged at the pool's $ per weighted token from settled completions; a new month resolves them."""

from __future__ import annotations

from datetime import timedelta

from alerts.evaluation import alert_rules_evaluate
from alerts.models import AlertEpisode
from entitlements.services import entitlement_grant
from entitlements.usd_budget_services import set_usd_budget
from entitlements.usd_per_token import usd_per_wt
from tests.alerts.conftest import minutes, now, rule
from tests.alerts.test_budget_kind import _completes
from tests.factories import grant_kwargs


def _open():
    return sorted(
        k for k in AlertEpisode.objects.filter(resolved_at__isnull=True).values_list("subject_key", flat=True)
    )


def test_usd_budget_alerts_at_50_80_and_100_percent_and_resets_with_the_month(fleet, people):
    # Events must be under 7 days old; the 30 minutes before `t` must lie in t's month.
    t = now() - timedelta(hours=1)
    if t.day == 1 and t.hour == 0:
        t = t.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2)
    acc = fleet.pool_a.accelerator
    acc.cloud_on_demand_per_hour = 3.0
    acc.save()
    fleet.pool_a.refresh_from_db()
    p = usd_per_wt(fleet.pool_a)
    assert p
    ent = entitlement_grant(actor=fleet.operator, reason="t",
                            **grant_kwargs(fleet.pool_a, fleet.acme, "1", start=t - timedelta(days=3)))  # fmt: skip
    set_usd_budget(actor=fleet.operator, tenant="acme", project=None, budget_usd=1000 * p, reason="cap")
    rule(scope="tenant", tenant=fleet.acme, kind="budget_used", threshold=80, channels=[])
    _completes(t - minutes(30), [400], ent, "a")
    assert alert_rules_evaluate(now=t)["opened"] == 0  # 40 %
    _completes(t - minutes(20), [150], ent, "b")
    assert alert_rules_evaluate(now=t)["opened"] == 1  # 55 %
    month = t.strftime("%Y-%m")
    assert _open() == [f"usd:acme:{month}:50"]
    _completes(t - minutes(10), [500], ent, "c")
    assert alert_rules_evaluate(now=t)["opened"] == 2  # 105 %: 80 and 100 too
    assert _open() == [f"usd:acme:{month}:100", f"usd:acme:{month}:50", f"usd:acme:{month}:80"]
    summary = AlertEpisode.objects.get(subject_key=f"usd:acme:{month}:100").summary
    assert summary.startswith(f"acme $ budget {month}: 105 % charged") and "refused until 1 " in summary
    assert alert_rules_evaluate(now=t + timedelta(days=31))["resolved"] == 3
