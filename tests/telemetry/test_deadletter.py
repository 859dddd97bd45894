"""Dead letters: a unit a pipeline cannot process is quarantined with its error, the rest goes on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.db.models import Sum

from telemetry.deadletter import dead_letter
from telemetry.fold import fold
from telemetry.models import DeadLetter, HourRollup, MinuteRollup, RollupBacklog
from telemetry.services import ingest_events
from tests.telemetry.helpers import T0, event

YEAR_9999 = datetime(9999, 12, 31, 23, 0, tzinfo=UTC)


def _hours():
    return dict(HourRollup.objects.values_list("bucket").annotate(n=Sum("requests")).order_by())


def test_a_backlog_hour_that_cannot_fold_is_quarantined_and_the_others_fold(fleet, settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    fold()
    ingest_events(source="gw", events=[event(i) for i in range(3)])  # hour T0
    ingest_events(source="gw", events=[event(100 + i, ts=(T0 + timedelta(hours=1)).isoformat()) for i in range(2)])
    # A row that passed validation once but breaks the fold: the hour after it is past the calendar.
    RollupBacklog.objects.create(hour=YEAR_9999)
    MinuteRollup.objects.create(bucket=YEAR_9999, tenant="acme", model="llama-test", region="us-test",
                                traffic_class="reserved", decision="admit", requests=1)  # fmt: skip

    assert fold() == 2
    assert _hours() == {T0: 3, T0 + timedelta(hours=1): 2}
    dl = DeadLetter.objects.get()
    assert (dl.stage, dl.key, dl.attempts) == ("fold", "hour 9999-12-31T23:00:00+00:00", 1)
    assert "OverflowError" in dl.error
    assert not RollupBacklog.objects.exists()  # out of the backlog: the next fold is not stuck on it

    # Ingest and the fold keep working after the quarantine.
    settings.TELEMETRY_FOLD_EVERY_S = 0
    assert ingest_events(source="gw", events=[event(500)]).accepted == 1
    assert _hours()[T0] == 4
    assert DeadLetter.objects.count() == 1


def test_the_same_unit_again_counts_attempts_and_poison_is_stored(db):
    payload = {"tenant": "ac\x00me", "nested": [[[[1.5, float("inf")]]]], "when": datetime(2026, 1, 5, 12, tzinfo=UTC)}
    first = dead_letter(stage="ingest_task", key="batch-1", payload=payload, error="boom \x00")
    again = dead_letter(stage="ingest_task", key="batch-1", payload=payload, error="boom again")
    assert first.pk == again.pk
    row = DeadLetter.objects.get()
    assert row.attempts == 2
    assert row.error == "boom again"
    assert row.payload == {"tenant": "ac\\u0000me", "nested": [[[[1.5, "inf"]]]], "when": "2026-01-05T12:00:00Z"}


def test_a_nesting_deeper_than_the_bound_is_cut(db):
    deep: list = []
    cur = deep
    for _ in range(100):
        cur.append([])
        cur = cur[0]
    dead_letter(stage="sink", key="deep", payload=deep, error="too deep")
    stored = DeadLetter.objects.get().payload
    depth = 0
    while isinstance(stored, list):
        stored, depth = stored[0], depth + 1
    assert (depth, stored) == (33, "<nested deeper than 32 levels>")


def test_operators_see_the_quarantine_on_the_fleet_page_and_in_the_admin(fleet):
    from tests.clients import web_client
    from tests.factories import UserFactory

    page = web_client(fleet.operator).get("/fleet/")
    assert "Quarantined: 0" in page.content.decode()
    dead_letter(stage="fold", key="hour x", payload={}, error="OverflowError()")
    dead_letter(stage="ingest_task", key="batch", payload={}, error="boom")
    dead_letter(stage="ingest_task", key="batch 2", payload={}, error="boom")
    page = web_client(fleet.operator).get("/fleet/", HTTP_HX_REQUEST="true")  # the polled partial carries it
    assert page.context["quarantined"] == {"fold": 1, "ingest_task": 2}
    assert "Quarantined: 3" in page.content.decode()
    admin = web_client(UserFactory(username="root", is_staff=True, is_superuser=True))
    listing = admin.get("/admin/telemetry/deadletter/")
    assert listing.status_code == 200
    assert "batch 2" in listing.content.decode()
