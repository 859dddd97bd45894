"""The statement shows borrowed and spilled traffic apart (issue 36): per entitlement, the requests admitted
on borrowed pool room and those spilled to its spillover target, the wt they settled and its CU-hours, in
the API's JSON, the page, its CSV and the live pages; a spilled request counts on the entitlement that
spilled, never on the target's."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from entitlements.models import Membership
from entitlements.services import entitlement_grant
from telemetry.fold import fold
from telemetry.services import ingest_events
from telemetry.statement import statement
from tests.factories import grant_kwargs
from tests.telemetry.helpers import T0, client_for, person

S = timedelta(seconds=1)
M = timedelta(minutes=1)
H = timedelta(hours=1)
NOTHING = {"admitted": 0, "settled": 0, "wt": 0.0, "cu_hours": 0.0}


def _ev(eid: str, at: timedelta, ent: Any, cls: str, **kw: Any) -> dict[str, Any]:
    e = {
        "event_id": eid,
        "ts": (T0 + at).isoformat(),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": cls,
        "entitlement": str(ent.uuid),
        "decision": "admit",
        "estimated_wt": 100,
        "prompt_tokens": 10,
    }
    e.update(kw)
    return e


@pytest.fixture
def mixed(fleet):
    """acme: 2 CU reserved that spilled 2 requests (settled 150 + 50 wt) and served 2 of its own (1,000
    wt each); 1 CU best_effort that borrowed 3 requests of 100 wt settled at 80 each, and used its own
    rate for 1 more (90,000 wt in one minute). globex's reserved entitlement is the spillover target."""
    reserved = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("2"), start=T0 - H, days=1), actor=fleet.operator, reason="t"
    )
    kw = grant_kwargs(fleet.pool_a, fleet.acme, Decimal("1"), traffic_class="best_effort", start=T0 - H, days=1)
    borrower = entitlement_grant(
        **kw, overage="borrow", borrowing_limit_cu=Decimal("2"), actor=fleet.operator, reason="t"
    )
    target = entitlement_grant(
        **grant_kwargs(fleet.pool_b, fleet.globex, Decimal("1"), start=T0 - H, days=1), actor=fleet.operator, reason="t"
    )
    events = []
    for i, wt in enumerate((150, 50)):
        events.append(_ev(f"s{i}", i * S, reserved, "reserved", source_kind="spillover"))
        done = {"decision": "complete", "actual_wt": wt, "output_tokens": 5}
        events.append(_ev(f"s{i}:c", 2 * M + i * S, reserved, "reserved", source_kind="spillover", **done))
    for i in range(2):
        events.append(_ev(f"r{i}", 3 * M, reserved, "reserved", source_kind="entitlement"))
        done = {"decision": "complete", "actual_wt": 1000, "output_tokens": 5}
        events.append(_ev(f"r{i}:c", 4 * M, reserved, "reserved", source_kind="entitlement", **done))
    for i in range(3):
        events.append(_ev(f"b{i}", 5 * M + i * S, borrower, "best_effort", source_kind="borrowed"))
        done = {"decision": "complete", "actual_wt": 80, "output_tokens": 5}
        events.append(_ev(f"b{i}:c", 6 * M, borrower, "best_effort", source_kind="borrowed", **done))
    events.append(_ev("o0", 7 * M, borrower, "best_effort", source_kind="entitlement"))
    done = {"decision": "complete", "actual_wt": 90_000, "output_tokens": 5}
    events.append(_ev("o0:c", 8 * M, borrower, "best_effort", source_kind="entitlement", **done))
    result = ingest_events(source="gw", events=events)
    assert (result.accepted, result.errors) == (16, [])
    fold()
    return reserved, borrower, target


def _period() -> dict[str, str]:
    return {"start": T0.isoformat(), "end": (T0 + 2 * H).isoformat()}


@pytest.mark.django_db
def test_borrowed_and_spilled_requests_wt_and_cu_hours(mixed):
    reserved, borrower, target = mixed
    spilled = statement(reserved, T0, T0 + 2 * H)
    # 150 + 50 wt ÷ 1000 wt/s ÷ 3600 s
    assert spilled["sources"] == {
        "borrowed": NOTHING,
        "spilled": {"admitted": 2, "settled": 2, "wt": 200.0, "cu_hours": 0.000056, "served_from": {}},
    }
    assert spilled["requests"]["admitted"] == 4  # own and spilled admissions together, as before
    assert spilled["used"]["wt"] == 2200.0
    borrowed = statement(borrower, T0, T0 + 2 * H)
    # 3 × 80 wt ÷ 1000 wt/s ÷ 3600 s
    assert borrowed["sources"] == {
        "borrowed": {"admitted": 3, "settled": 3, "wt": 240.0, "cu_hours": 0.000067},
        "spilled": {**NOTHING, "served_from": {}},
    }
    # the compatible estimate stays what it was: settled wt above the own rate (60,000 wt a minute),
    # minute by minute; it does not know which requests were admitted as borrowed
    assert borrowed["borrowing"]["cu_hours"] == 0.008333  # 90,000 − 60,000 wt in minute 8
    # the target served the spilled requests, but they are the spilling entitlement's traffic
    assert statement(target, T0, T0 + 2 * H)["sources"] == {
        "borrowed": NOTHING,
        "spilled": {**NOTHING, "served_from": {}},
    }


@pytest.mark.django_db
def test_the_statement_api_shows_the_split(mixed, fleet):
    reserved, borrower, _ = mixed
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    r = viewer.get(f"/api/v1/entitlements/{reserved.uuid}/statement", _period())
    assert r.status_code == 200
    assert r.json()["sources"]["spilled"] == {
        "admitted": 2,
        "settled": 2,
        "wt": 200.0,
        "cu_hours": 0.000056,
        "served_from": {},  # these events name no serving pool; tests/statement/test_served_from.py has ones that do
    }
    body = viewer.get(f"/api/v1/entitlements/{borrower.uuid}/statement", _period()).json()
    assert body["sources"]["borrowed"] == {"admitted": 3, "settled": 3, "wt": 240.0, "cu_hours": 0.000067}
    assert set(body["borrowing"]) == {"cu_hours", "reclaims", "reclaim_latency_p95_s"}  # kept as they were


@pytest.mark.django_db
def test_the_page_and_its_csv_show_the_split(mixed, fleet):
    reserved, borrower, _ = mixed
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    page = viewer.get(f"/entitlements/{borrower.uuid}/statement/", _period()).content.decode()
    assert _row(page, "borrowed") == ["on borrowed capacity", "3", "3", "240 wt", "0.0001 CU-h"]
    assert _row(page, "spilled") == ["spilled over", "0", "0", "0 wt", "0.0000 CU-h"]
    raw = viewer.get(f"/entitlements/{reserved.uuid}/statement.csv", _period()).content.decode()
    figures = dict(csv.reader(io.StringIO(raw)))
    assert [figures[f"sources.spilled.{k}"] for k in ("admitted", "settled", "wt", "cu_hours")] == [
        "2",
        "2",
        "200.0",
        "5.6e-05",
    ]


def _row(html: str, kind: str) -> list[str]:
    """The cells of the sources row of `kind`, tags stripped."""
    start = html.index(f'<tr data-source="{kind}">')
    row = html[start : html.index("</tr>", start)]
    return [re.sub(r"<[^>]+>", "", c).replace("\xa0", " ").strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


@pytest.mark.django_db
def test_the_live_pages_show_borrowed_and_spilled_lines(mixed, fleet):
    reserved, _, _ = mixed
    viewer = client_for(person("acme-viewer", tenant=fleet.acme))
    r = viewer.get("/usage/", {"range": "7d"})
    assert r.status_code == 200
    assert (r.context["sources"]["borrowed"]["admitted"], r.context["sources"]["borrowed"]["wt"]) == (3, 240.0)
    assert (r.context["sources"]["spilled"]["admitted"], r.context["sources"]["spilled"]["wt"]) == (2, 200.0)
    fig = r.context["sources_fig"]
    assert [(t["name"], sum(t["y"])) for t in fig["data"]] == [("on borrowed capacity", 3), ("spilled over", 2)]
    html = r.content.decode()
    assert _row(html, "borrowed")[:2] == ["on borrowed capacity", "3"]
    assert _row(html, "spilled")[:2] == ["spilled over", "2"]
    export = viewer.get("/usage/export.csv", {"range": "7d"})
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    got = {
        c: sum(float(x[c]) for x in rows)
        for c in ("admitted_borrowed", "admitted_spilled", "borrowed_wt", "spilled_wt")
    }
    assert got == {"admitted_borrowed": 3, "admitted_spilled": 2, "borrowed_wt": 240.0, "spilled_wt": 200.0}
    one = viewer.get(f"/entitlements/{reserved.uuid}/", {"range": "7d"})
    assert one.status_code == 200
    assert one.context["sources"]["spilled"] == {"label": "spilled over", "admitted": 2, "wt": 200.0}
    assert one.context["sources"]["borrowed"] == {"label": "on borrowed capacity", "admitted": 0, "wt": 0.0}


@pytest.mark.django_db
def test_the_operators_fleet_shows_borrowed_and_spilled_lines(mixed):
    """/fleet/ across every tenant: the rows and the figure the tenant's live pages have (the operator's
    view showed neither)."""
    operator = client_for(person("fleet-operator", platform="operator"))
    r = operator.get("/fleet/", {"range": "7d"})
    assert r.status_code == 200
    fig = r.context["sources_fig"]
    assert [(t["name"], sum(t["y"])) for t in fig["data"]] == [("on borrowed capacity", 3), ("spilled over", 2)]
    html = r.content.decode()
    assert 'id="fleet-sources"' in html and 'id="fleet-sources-chart"' in html
    assert _row(html, "borrowed") == ["on borrowed capacity", "3", "240 wt"]
    assert _row(html, "spilled") == ["spilled over", "2", "200 wt"]
    assert "beyond the tenants' own capacity" in html and "beyond your own" not in html


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_viewer_sees_borrowed_and_spilled_rows_in_a_browser(mixed, fleet, serial_live_server, browser):
    _, borrower, _ = mixed
    viewer = get_user_model().objects.create_user("acme-browser", password="demo")
    Membership.objects.create(user=viewer, tenant=fleet.acme, role="viewer")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    period = f"start={T0.date().isoformat()}&end={(T0 + timedelta(days=1)).date().isoformat()}"
    page.goto(f"{serial_live_server.url}/entitlements/{borrower.uuid}/statement/?{period}")
    page.fill("input[name=username]", "acme-browser")
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_selector("#sources")
    table = page.locator("#sources")
    assert table.is_visible()
    cells = table.locator('tr[data-source="borrowed"] td').all_inner_texts()
    assert [c.replace("\xa0", " ") for c in cells[:4]] == ["on borrowed capacity", "3", "3", "240 wt"]
    assert table.locator('tr[data-source="spilled"] td').nth(1).inner_text() == "0"
    page.goto(f"{serial_live_server.url}/usage/?range=7d")
    page.wait_for_selector("#usage-sources")
    usage = page.locator("#usage-sources")
    assert usage.is_visible()
    assert usage.locator('tr[data-source="borrowed"] td').nth(1).inner_text() == "3"
    assert usage.locator('tr[data-source="spilled"] td').nth(1).inner_text() == "2"
    chart = page.locator("#usage-sources-chart")
    chart.scroll_into_view_if_needed()
    page.wait_for_selector("#usage-sources-chart .main-svg")  # Plotly drew the two lines
    assert chart.locator(".scatterlayer .trace").count() == 2
