"""The statement names the pools that served an entitlement's spilled requests (issue 36):
`sources.spilled.served_from: {pool: {admitted, settled, wt, cu_hours}}`, exact over hour rollups and
the minute rollups at the period's edges, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from entitlements.services import entitlement_grant
from telemetry.fold import fold
from telemetry.services import ingest_events
from telemetry.statement import statement
from tests.factories import grant_kwargs
from tests.statement.test_borrowed_spilled import _row
from tests.telemetry.helpers import T0, client_for, person

M = timedelta(minutes=1)
H = timedelta(hours=1)
# The period: a ragged half hour before T0 (minute rollups), the whole hour from T0 (hour rollups), and
# a ragged half hour after (minute rollups again).
START, END = T0 - 30 * M, T0 + 90 * M


def _ev(eid: str, at: timedelta, ent: Any, **kw: Any) -> dict[str, Any]:
    e = {
        "event_id": eid,
        "ts": (T0 + at).isoformat(),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "entitlement": str(ent.uuid),
        "decision": "admit",
        "estimated_wt": 100,
        "prompt_tokens": 10,
    }
    e.update(kw)
    return e


@pytest.fixture
def spilled(fleet, settings):
    """acme's 2 CU reserved on pool-a (R = 1000 wt/s) spilled 2 requests to pool-b, admitted in the whole
    hour and settled 150 and 50 wt in the late edge; 1 to a pool the catalogue does not know (stored as
    admission answered it), admitted and settled (36 wt) in the early edge; 1 without served_from (a
    gateway from before it was kept, settled 14 wt); and served 1 of its own."""
    settings.TELEMETRY_FOLD_EVERY_S = 3600
    ent = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - 2 * H, days=1),
        actor=fleet.operator,
        reason="t",
    )
    spill = {"source_kind": "spillover"}
    events = []
    for i, wt in enumerate((150, 50)):
        events.append(_ev(f"b{i}", 10 * M, ent, served_from="pool-b", **spill))
        done = {"decision": "complete", "actual_wt": wt, "served_from": "pool-b", **spill}
        events.append(_ev(f"b{i}:c", 61 * M + i * M, ent, **done))
    events.append(_ev("g0", -20 * M, ent, served_from="pool-gone", **spill))
    events.append(_ev("g0:c", -19 * M, ent, decision="complete", actual_wt=36, served_from="pool-gone", **spill))
    events.append(_ev("n0", 20 * M, ent, **spill))
    events.append(_ev("n0:c", 21 * M, ent, decision="complete", actual_wt=14, **spill))
    events.append(_ev("o0", 30 * M, ent, source_kind="entitlement"))
    events.append(_ev("o0:c", 31 * M, ent, decision="complete", actual_wt=1000, source_kind="entitlement"))
    # outside the period: counted nowhere here
    events.append(_ev("x0", 95 * M, ent, served_from="pool-b", **spill))
    result = ingest_events(source="gw", events=events)
    assert (result.accepted, result.errors) == (11, [])
    fold()
    return ent


EXPECTED = {
    "admitted": 4,
    "settled": 4,
    "wt": 250.0,
    "cu_hours": 0.000069,  # 250 wt ÷ 1000 wt/s ÷ 3600 s
    "served_from": {
        "pool-b": {"admitted": 2, "settled": 2, "wt": 200.0, "cu_hours": 0.000056},
        "pool-gone": {"admitted": 1, "settled": 1, "wt": 36.0, "cu_hours": 0.00001},
    },
}


def _check(ent):
    s = statement(ent, START, END)
    assert s["sources"]["spilled"] == EXPECTED
    assert s["requests"]["admitted"] == 5


@pytest.mark.django_db
def test_the_statement_names_the_serving_pools(spilled):
    _check(spilled)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_same_on_postgresql(spilled):
    from django.db import connection

    assert connection.vendor == "postgresql"
    _check(spilled)


@pytest.mark.django_db
def test_the_api_and_the_csv_name_them(spilled, fleet):
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    period = {"start": START.isoformat(), "end": END.isoformat()}
    r = viewer.get(f"/api/v1/entitlements/{spilled.uuid}/statement", period)
    assert r.status_code == 200
    assert r.json()["sources"]["spilled"] == EXPECTED
    raw = viewer.get(f"/entitlements/{spilled.uuid}/statement.csv", period).content.decode()
    figures = dict(csv.reader(io.StringIO(raw)))
    pool_b = [figures[f"sources.spilled.served_from.pool-b.{k}"] for k in ("admitted", "settled", "wt")]
    assert pool_b == ["2", "2", "200.0"]


@pytest.mark.django_db
def test_the_page_shows_a_row_per_serving_pool(spilled, fleet):
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    period = {"start": START.isoformat(), "end": END.isoformat()}
    html = viewer.get(f"/entitlements/{spilled.uuid}/statement/", period).content.decode()
    assert _row(html, "spilled") == ["spilled over", "4", "4", "250 wt", "0.0001 CU-h"]
    pools = re.findall(r'<tr data-served-from="([^"]+)">', html)
    assert pools == ["pool-b", "pool-gone"]
    start = html.index('<tr data-served-from="pool-b">')
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html[start : html.index("</tr>", start)])
    assert [re.sub(r"<[^>]+>", "", c).replace("\xa0", " ").strip() for c in cells] == [
        "of which served by pool pool-b", "2", "2", "200 wt", "0.0001 CU-h",
    ]  # fmt: skip
