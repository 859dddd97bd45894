"""`manage.py seed_history` writes the demo's history once: hour and day rollups for every active
entitlement over the days asked for (and the findings seeded on top), and a second run changes nothing."""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from demo.findings import GROW, _ent
from demo.history import seed_history
from entitlements.models import Entitlement
from entitlements.selectors import active_at
from telemetry.models import DayRollup, HourRollup, MinuteRollup

pytestmark = pytest.mark.django_db


def test_seed_history_command_writes_the_rollups_once():
    call_command("load_demo", stdout=StringIO())
    first = StringIO()
    end = timezone.now().replace(minute=0, second=0, microsecond=0)  # the history ends at the last full hour
    # What the seeded history writes over these three days (seed 11), counted in a rolled-back run.
    with transaction.atomic():
        expected = seed_history(days=3, now=end)
        # the count it returns is exactly the admitted requests it wrote
        assert HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"] == expected
        transaction.set_rollback(True)
    assert not HourRollup.objects.exists()
    call_command("seed_history", days=3, stdout=first)
    said = re.fullmatch(r"demo history: (\d+) requests written", first.getvalue().strip())
    assert said and int(said[1]) == expected
    written = HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"]
    # the history's requests, plus what demo.findings adds for reconciliation to find (issue 17.2)
    assert written >= int(said[1])
    history = HourRollup.objects.filter(decision="admit", bucket__gte=end - timedelta(days=3), bucket__lt=end)
    assert history.values("bucket").distinct().count() == 3 * 24  # every hour of the three days
    # every active demo entitlement has history at hour and day grain; minutes only where the grow
    # scope's burst minutes are laid out for the replay (demo.findings), each such hour's admits exactly
    tenants = set(HourRollup.objects.values_list("tenant", flat=True))
    assert tenants == set(active_at(Entitlement.objects.all(), end).values_list("tenant__slug", flat=True))
    grow = _ent(*GROW)
    assert set(MinuteRollup.objects.values_list("entitlement", flat=True).distinct()) == {str(grow.uuid)}
    minute_admits = MinuteRollup.objects.filter(decision="admit").values_list("bucket", "requests")
    per_hour: dict = {}
    for bucket, n in minute_admits:
        hour = bucket.replace(minute=0)
        per_hour[hour] = per_hour.get(hour, 0) + n
    hours = HourRollup.objects.filter(entitlement=str(grow.uuid), decision="admit", bucket__in=list(per_hour))
    assert per_hour and per_hour == dict(hours.values("bucket").annotate(n=Sum("requests")).values_list("bucket", "n"))
    assert DayRollup.objects.aggregate(n=Sum("requests"))["n"] == HourRollup.objects.aggregate(n=Sum("requests"))["n"]

    again = StringIO()
    call_command("seed_history", days=3, stdout=again)
    assert again.getvalue().strip() == "demo history: already present, unchanged"
    assert HourRollup.objects.filter(decision="admit").aggregate(n=Sum("requests"))["n"] == written
