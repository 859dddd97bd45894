"""Ingest keeps a spilled event's `served_from` (issue 36): validated like the other identifiers, stored
by both ingest paths, and counted per serving pool in the rollups."""

from __future__ import annotations

from datetime import timedelta

import pytest

from telemetry.columns import clean_columns
from telemetry.fold import fold
from telemetry.ingest import _store_portable, _store_staged
from telemetry.models import AdmissionEvent, EventKey, HourRollup, MinuteRollup, RollupBacklog
from telemetry.services import ingest_events
from telemetry.validation import SLUG_MESSAGE, Catalogue, FieldError, clean_event
from tests.telemetry.helpers import T0, client_for, event, person

M = timedelta(minutes=1)
CAT = Catalogue(
    tenants=frozenset({"acme"}),
    models=frozenset({"llama-test"}),
    regions=frozenset({"us-test"}),
    classes=frozenset({"reserved"}),
    projects=frozenset(),
)


def _spilled():
    """2 requests spilled to pool-b (settled 150 and 50 wt), 1 to a pool the catalogue does not know
    (settled 36 wt), 1 own request: what admission reports for each."""
    out = []
    for i, (pool, wt) in enumerate((("pool-b", 150), ("pool-b", 50), ("pool-gone", 36))):
        kw = {"source_kind": "spillover", "served_from": pool}
        out.append(event(i, ts=(T0 + i * M).isoformat(), **kw))
        out.append(event(i, event_id=f"r{i}:c", ts=(T0 + 5 * M).isoformat(), decision="complete", actual_wt=wt, **kw))
    out.append(event(9, ts=(T0 + M).isoformat(), source_kind="entitlement"))
    return out


def _stored():
    return sorted(AdmissionEvent.objects.values_list("event_id", "served_from"))


STORED = [
    ("r0", "pool-b"),
    ("r0:c", "pool-b"),
    ("r1", "pool-b"),
    ("r1:c", "pool-b"),
    ("r2", "pool-gone"),
    ("r2:c", "pool-gone"),
    ("r9", None),
]


def _by_pool(model):
    """(decision, served_from) → (spilled requests, spilled wt) summed over the level's rows."""
    out: dict[tuple[str, str], tuple[int, float]] = {}
    for r in model.objects.values("decision", "served_from", "spilled_requests", "spilled_wt"):
        n, wt = out.get((r["decision"], r["served_from"]), (0, 0.0))
        out[(r["decision"], r["served_from"])] = (n + r["spilled_requests"], wt + r["spilled_wt"])
    return out


BY_POOL = {
    ("admit", "pool-b"): (2, 0.0),
    ("admit", "pool-gone"): (1, 0.0),
    ("admit", ""): (0, 0.0),  # the own request
    ("complete", "pool-b"): (2, 200.0),
    ("complete", "pool-gone"): (1, 36.0),
}


def _check_ingest(store=None):
    result = ingest_events(source="gw", events=_spilled(), store=store)
    assert (result.accepted, result.duplicates, result.errors) == (7, 0, [])
    assert _stored() == STORED
    fold()
    assert _by_pool(MinuteRollup) == _by_pool(HourRollup) == BY_POOL
    # a replay changes nothing, served_from included
    again = ingest_events(source="gw", events=_spilled(), store=store)
    assert (again.accepted, again.duplicates) == (0, 7)
    assert _by_pool(MinuteRollup) == BY_POOL


def test_ingest_stores_served_from_and_counts_spills_per_pool(fleet, settings):
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    _check_ingest()


@pytest.mark.postgres
@pytest.mark.parametrize("store", [_store_staged, _store_portable], ids=["staged", "portable"])
def test_both_postgresql_paths_store_served_from(fleet, settings, store):
    from django.db import connection

    assert connection.vendor == "postgresql"
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    _check_ingest(store)
    for model in (AdmissionEvent, EventKey, MinuteRollup, HourRollup, RollupBacklog):
        model.objects.all().delete()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (5, SLUG_MESSAGE),
        (["pool-b"], SLUG_MESSAGE),
        ("p" * 81, SLUG_MESSAGE),
        ("pool\x00b", "must not contain control characters"),
        ("pool\nb", "must not contain control characters"),
        ("<b>x</b>", SLUG_MESSAGE),  # markup: a page shows it
        (" ", SLUG_MESSAGE),  # blank is not absent
        ("pool b", SLUG_MESSAGE),
        ("pöol", SLUG_MESSAGE),
        ("pool/b", SLUG_MESSAGE),
    ],
)
def test_a_bad_served_from_is_a_400_naming_it(fleet, value, message):
    gw = client_for(person("gw", platform="gateway"))
    bad = event(0, source_kind="spillover", served_from=value)
    r = gw.post("/api/v1/telemetry/events", {"source": "gw", "events": [bad]}, content_type="application/json")
    assert r.status_code == 400
    assert r.json() == {
        "accepted": 0,
        "duplicates": 0,
        "errors": [{"index": 0, "field": "served_from", "message": message}],
    }
    assert AdmissionEvent.objects.count() == 0


def test_a_bad_served_from_beside_good_events_keeps_them(fleet):
    gw = client_for(person("gw", platform="gateway"))
    events = [event(0, served_from="pool-b"), event(1, served_from="p" * 81), event(2, served_from="p" * 80),
              event(3, served_from="llama-3.1-70b-us")]  # fmt: skip
    r = gw.post("/api/v1/telemetry/events", {"source": "gw", "events": events}, content_type="application/json")
    assert r.status_code == 200
    assert r.json()["errors"] == [{"index": 1, "field": "served_from", "message": SLUG_MESSAGE}]
    assert _stored() == [("r0", "pool-b"), ("r2", "p" * 80), ("r3", "llama-3.1-70b-us")]


def test_column_and_row_validators_agree_on_served_from():
    events = [event(0, served_from="pool-b"), event(1, served_from=""), event(2), event(3, served_from=None),
              event(5, served_from="llama-3.1-70b-us-east_h200")]  # fmt: skip
    cols = clean_columns(events, CAT)
    assert cols is not None
    assert cols["served_from"] == ["pool-b", None, None, None, "llama-3.1-70b-us-east_h200"]  # dots: demo pools
    assert [clean_event(e, CAT)["served_from"] for e in events] == cols["served_from"]
    # a bad one sends the batch to the row validator, which names it
    bad = [*events, event(4, served_from=7)]
    assert clean_columns(bad, CAT) is None
    for odd in ("<b>x</b>", " ", "pool/b"):  # the column validator refuses what the row one names
        assert clean_columns([*events, event(4, served_from=odd)], CAT) is None
    with pytest.raises(FieldError) as exc:
        clean_event(bad[-1], CAT)
    assert (exc.value.field, exc.value.message) == ("served_from", SLUG_MESSAGE)
