"""Rollups count borrowed and spilled traffic apart (issue 36): admitted requests and settled wt by
source_kind at every level, through ingest, the fold (SQL on both engines) and the backfill path, and
the usage API's series read them."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

import pytest

from telemetry.columns import FIELDS
from telemetry.fold import fold
from telemetry.models import AdmissionEvent, DayRollup, HourRollup, MinuteRollup, RollupBacklog
from telemetry.rollups import rollups_add
from telemetry.services import ingest_events
from tests.telemetry.helpers import T0, client_for, event, person

S = timedelta(seconds=1)
M = timedelta(minutes=1)
COLUMNS = ("borrowed_requests", "borrowed_wt", "spilled_requests", "spilled_wt")


def _at(eid: str, at: timedelta, **kw):
    return event(0, event_id=eid, ts=(T0 + at).isoformat(), **kw)


def _events():
    """3 borrowed admits settled at 80 wt each, 2 spilled ones settled at 150 and 50, all admitted in
    12:59 and settled in 13:01–13:02 (two hours of one day); own and fail-open traffic beside them."""
    out = []
    for i in range(3):
        out.append(_at(f"b{i}", 59 * M + i * 10 * S, source_kind="borrowed"))
        out.append(_at(f"b{i}:c", 61 * M, decision="complete", actual_wt=80, source_kind="borrowed"))
    for i, wt in enumerate((150, 50)):
        out.append(_at(f"s{i}", 59 * M + (30 + 10 * i) * S, source_kind="spillover"))
        out.append(_at(f"s{i}:c", 62 * M, decision="complete", actual_wt=wt, source_kind="spillover"))
    for i in range(4):
        out.append(_at(f"e{i}", 10 * M, source_kind="entitlement"))
        out.append(_at(f"e{i}:c", 11 * M, decision="complete", actual_wt=1000, source_kind="entitlement"))
    out.append(_at("f0", 12 * M, source_kind="fail_open"))
    return out


def _by(model):
    """(bucket, decision) → the source columns summed over the level's rows."""
    out = defaultdict(lambda: [0, 0.0, 0, 0.0])
    for row in model.objects.values("bucket", "decision", *COLUMNS):
        acc = out[(row["bucket"], row["decision"])]
        for i, c in enumerate(COLUMNS):
            acc[i] += row[c]
    return {k: tuple(v) for k, v in out.items()}


H12, H13, DAY = T0, T0 + timedelta(hours=1), T0.replace(hour=0)
NONE = (0, 0.0, 0, 0.0)
ADMITTED = (3, 0.0, 2, 0.0)  # admit rows: 3 borrowed and 2 spilled admissions, no settled wt
SETTLED_B = (3, 240.0, 0, 0.0)  # 3 × 80
SETTLED_S = (0, 0.0, 2, 200.0)  # 150 + 50


def _expected_levels():
    minute = {
        (T0 + 59 * M, "admit"): ADMITTED,
        (T0 + 61 * M, "complete"): SETTLED_B,
        (T0 + 62 * M, "complete"): SETTLED_S,
        (T0 + 10 * M, "admit"): NONE,
        (T0 + 11 * M, "complete"): NONE,
        (T0 + 12 * M, "admit"): NONE,
    }
    hour = {(H12, "admit"): ADMITTED, (H12, "complete"): NONE, (H13, "complete"): (3, 240.0, 2, 200.0)}
    day = {(DAY, "admit"): ADMITTED, (DAY, "complete"): (3, 240.0, 2, 200.0)}
    return minute, hour, day


def _check_ingest_and_fold():
    result = ingest_events(source="gw", events=_events())
    assert (result.accepted, result.errors) == (19, [])
    fold()
    minute, hour, day = _expected_levels()
    assert _by(MinuteRollup) == minute
    assert _by(HourRollup) == hour
    assert _by(DayRollup) == day
    # a fold replaces the hour's sums from its minutes: noting it again changes nothing
    RollupBacklog.objects.create(hour=H13)
    assert fold() == 1
    assert (_by(HourRollup), _by(DayRollup)) == (hour, day)


def test_ingest_and_fold_count_borrowed_and_spilled_apart(fleet, settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    _check_ingest_and_fold()


@pytest.mark.postgres
def test_the_same_figures_on_postgresql(fleet, settings):
    """PostgreSQL's path: the binary COPY stage of the minute upsert and the fold's INSERT … SELECT SUM
    give the figures SQLite gives (the test above, run by the default pass)."""
    from django.db import connection

    assert connection.vendor == "postgresql"
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    _check_ingest_and_fold()


def test_the_backfill_path_adds_the_same_sums(fleet, settings):
    """rollups_add (demo history, backfills) writes all three levels at once, coarsening in Python: the
    same figures as ingest and the SQL fold."""
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    ingest_events(source="gw", events=_events())
    rows = list(AdmissionEvent.objects.values(*FIELDS))
    for model in (MinuteRollup, HourRollup, DayRollup):
        model.objects.all().delete()
    rollups_add(rows)
    assert (_by(MinuteRollup), _by(HourRollup), _by(DayRollup)) == _expected_levels()


def test_usage_api_series_show_borrowed_and_spilled(fleet):
    ingest_events(source="gw", events=_events())
    fold()
    viewer = client_for(person("viewer", tenant=fleet.acme))
    start = T0.isoformat()
    r = viewer.get("/api/v1/usage", {"start": start, "end": (T0 + timedelta(hours=2)).isoformat()})
    assert r.status_code == 200
    s = r.json()["series"]
    zeros = [0] * 120
    assert s["admitted_borrowed"] == zeros[:59] + [3] + zeros[60:]
    assert s["admitted_spilled"] == zeros[:59] + [2] + zeros[60:]
    assert s["borrowed_wt"] == zeros[:61] + [240.0] + zeros[62:]
    assert s["spilled_wt"] == zeros[:62] + [200.0] + zeros[63:]
    assert sum(s["admitted_requests"]) == 10  # own, borrowed, spilled and fail-open admissions together
    # a day reads hour rollups: the same figures per hour
    day = viewer.get("/api/v1/usage", {"start": start, "end": (T0 + timedelta(hours=24)).isoformat()}).json()
    assert day["level"] == "hour"
    assert (day["series"]["admitted_borrowed"][:2], day["series"]["admitted_spilled"][:2]) == ([3, 0], [2, 0])
    assert (day["series"]["borrowed_wt"][:2], day["series"]["spilled_wt"][:2]) == ([0.0, 240.0], [0.0, 200.0])
