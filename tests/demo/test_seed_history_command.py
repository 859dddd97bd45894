"""`manage.py seed_history` writes the demo's history once: hour and day rollups for every active
entitlement over the days asked for, and a second run changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.db.models import Sum

from telemetry.models import DayRollup, HourRollup, MinuteRollup

pytestmark = pytest.mark.django_db


def test_seed_history_command_writes_the_rollups_once():
    call_command("load_demo", stdout=StringIO())
    first = StringIO()
    call_command("seed_history", days=3, stdout=first)
    written = HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"]
    assert first.getvalue().strip() == f"demo history: {written} requests written"
    assert written > 0
    hours = HourRollup.objects.values("bucket").distinct().count()
    assert hours == 3 * 24
    # every active demo entitlement has history, at hour and day grain only
    tenants = set(HourRollup.objects.values_list("tenant", flat=True))
    assert tenants >= {"acme", "globex"}
    assert not MinuteRollup.objects.exists()
    assert DayRollup.objects.aggregate(n=Sum("requests"))["n"] == HourRollup.objects.aggregate(n=Sum("requests"))["n"]

    again = StringIO()
    call_command("seed_history", days=3, stdout=again)
    assert again.getvalue().strip() == "demo history: already present, unchanged"
    assert HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"] == written
