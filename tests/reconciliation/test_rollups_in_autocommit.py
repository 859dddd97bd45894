"""A staged write (binary COPY into an ON COMMIT DELETE ROWS temp table, then INSERT … SELECT) called in
autocommit: each statement would commit on its own and empty the stage between the two, so the rollups
silently gained nothing (a reconciliation run then read 0 % use on PostgreSQL only)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from telemetry.models import DayRollup, HourRollup
from telemetry.rollups import rollups_add
from tests.reconciliation.conftest import row

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_rollups_added_in_autocommit_land(grant):
    assert connection.get_autocommit()
    ent = grant("2")
    ts = timezone.now().replace(minute=5, second=0, microsecond=0) - timedelta(hours=2)
    rollups_add([row(ent, ts, "complete", actual_wt=1000.0, prompt_tokens=10)], with_minutes=False)
    assert HourRollup.objects.filter(entitlement=ent.uuid).values_list("actual_wt", flat=True).get() == 1000.0
    assert DayRollup.objects.filter(entitlement=ent.uuid).count() == 1
