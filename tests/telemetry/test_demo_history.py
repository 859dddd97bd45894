from datetime import UTC, datetime

import pytest
from django.db.models import Sum

from entitlements.services import entitlement_grant
from telemetry.demo_history import seed_history
from telemetry.models import DayRollup, HourRollup, MinuteRollup
from tests.factories import grant_kwargs

NOW = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)


@pytest.mark.django_db
def test_seed_history_writes_days_of_rollups_once(fleet):
    entitlement_grant(actor=fleet.operator, reason="x",
                      **grant_kwargs(fleet.pool_a, fleet.acme, "10", start=datetime(2026, 1, 1, tzinfo=UTC), days=None))  # fmt: skip
    # 2 days × 24 h × 6 samples × (admit + complete) for the one entitlement
    assert seed_history(days=2, now=NOW) == 2 * 24 * 6 * 2
    assert seed_history(days=2, now=NOW) == 0
    hours = HourRollup.objects.filter(decision="admit").values("bucket").distinct().count()
    assert hours == 48
    sums = HourRollup.objects.aggregate(est=Sum("estimated_wt"), act=Sum("actual_wt"))
    assert sums["act"] == pytest.approx(sums["est"] * 0.93)
    # Never above the entitlement: 10 CU × R 1000 wt/s × 3600 s per hour at most.
    peak = max(HourRollup.objects.filter(decision="admit").values_list("estimated_wt", flat=True))
    assert peak <= 10 * 1000 * 3600
    # 10-minute samples are history at hour and day grain only: a minute chart would show 10× spikes
    assert not MinuteRollup.objects.exists()
    assert DayRollup.objects.aggregate(n=Sum("requests"))["n"] == HourRollup.objects.aggregate(n=Sum("requests"))["n"]
