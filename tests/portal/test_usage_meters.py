"""Used ÷ bought meters (issue 22): on the tenant home and the entitlement page, each `<meter>`'s value is
the evidence statement's figure for the period the meter names; a total per model; the usage pages open
on the shortest range that has data and say which."""

from __future__ import annotations

import re
from datetime import datetime
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from demo.history import seed_history
from entitlements.models import Entitlement
from telemetry.statement import statement

METER = re.compile(r"<meter [^>]*>")


def _attrs(tag: str) -> dict[str, str]:
    return dict(re.findall(r'([\w-]+)="([^"]*)"', tag))


@pytest.fixture
def viewer(db):
    call_command("load_demo", stdout=StringIO())
    seed_history(days=2, now=timezone.now())
    c = Client()
    c.force_login(get_user_model().objects.get(username="demo-viewer"))
    return c


def _check_meters(html: str, ent: Entitlement) -> list[dict[str, str]]:
    meters = [_attrs(t) for t in METER.findall(html) if "data-figure" in t]
    assert {m["data-figure"] for m in meters} == {"used.share", "used.peak_share_1m"}
    for m in meters:
        start, end = datetime.fromisoformat(m["data-start"]), datetime.fromisoformat(m["data-end"])
        figure = m["data-figure"].removeprefix("used.")
        expected = statement(ent, start, end)["used"][figure]
        assert float(m["value"]) == pytest.approx(expected, abs=5e-7), m
        assert float(m["max"]) >= float(m["value"])
    return meters


def test_tenant_home_meters_equal_the_statement_and_totals_add_up(viewer):
    html = viewer.get("/").content.decode()
    ents = list(Entitlement.objects.filter(tenant__slug="acme").select_related("model"))
    shares = []
    for ent in ents:
        row = html.split(f'data-entitlement="{ent.uuid}"')[1].split("</tr>")[0]
        meters = _check_meters(row, ent)
        period = next(m for m in meters if m["data-figure"] == "used.share" and "30 days" in m["aria-label"])
        shares.append(float(period["value"]))
    # Two days of seeded history: every entitlement has used some of what it bought over 30 days.
    assert all(s > 0 for s in shares)
    # One total per model: Σ used CU-h ÷ Σ bought CU-h over its entitlements.
    models = sorted({e.model.slug for e in ents})
    assert re.findall(r'<article class="model-total" data-model="([^"]+)"', html) == models
    for slug in models:
        card = html.split(f'data-model="{slug}"')[1].split("</article>")[0]
        used = bought = 0.0
        for e in (e for e in ents if e.model.slug == slug):
            m = _attrs(METER.findall(html.split(f'data-entitlement="{e.uuid}"')[1].split("</tr>")[0])[-1])
            s = statement(e, datetime.fromisoformat(m["data-start"]), datetime.fromisoformat(m["data-end"]))
            used, bought = used + s["used"]["cu_hours"], bought + s["bought"]["cu_hours"]
        assert float(_attrs(METER.findall(card)[0])["value"]) == pytest.approx(used / bought, abs=5e-7)


def test_entitlement_page_shows_the_same_meters(viewer):
    ent = Entitlement.objects.filter(tenant__slug="acme").first()
    html = viewer.get(f"/entitlements/{ent.uuid}/").content.decode()
    section = html.split('id="used-of-bought"')[1].split("</section>")[0]
    assert len(_check_meters(section, ent)) == 3


def test_usage_opens_on_the_shortest_range_with_data_and_says_so(viewer):
    # seed_history writes hour rollups up to the last full hour, no minutes: the minute-level ranges
    # (up to 6 h) are empty, 24 h reads hours and has data.
    html = viewer.get("/usage/").content.decode()
    assert 'href="?tenant=acme&amp;range=24h" aria-current="page"' in html
    assert "showing the last 24h, the shortest range with data" in html
    html = viewer.get("/usage/?range=1h").content.decode()
    assert 'range=1h" aria-current="page"' in html and "showing the last 1h ·" in html


def test_no_data_anywhere_falls_back_to_24h_and_says_so(db):
    call_command("load_demo", stdout=StringIO())
    c = Client()
    c.force_login(get_user_model().objects.get(username="demo-viewer"))
    html = c.get("/usage/").content.decode()
    assert "no data in any range yet: showing the last 24h" in html


def test_a_period_budget_shows_as_its_own_meter(viewer):
    from telemetry.budgets import budget_usage

    ent = Entitlement.objects.filter(tenant__slug="acme").first()
    Entitlement.objects.filter(pk=ent.pk).update(daily_budget=10**12, budget_unit="wt")
    ent.refresh_from_db()
    html = viewer.get("/").content.decode()
    row = html.split(f'data-entitlement="{ent.uuid}"')[1].split("</tr>")[0]
    tag = next(t for t in METER.findall(row) if "daily budget" in t)
    daily = budget_usage(ent)["daily"]
    assert _attrs(tag)["data-period"] == daily["period"]
    assert float(_attrs(tag)["value"]) == pytest.approx(daily["share"], abs=1e-4)  # the page read it a moment earlier
    other = Entitlement.objects.filter(tenant__slug="acme").exclude(pk=ent.pk).first()
    assert "budget" not in html.split(f'data-entitlement="{other.uuid}"')[1].split("</tr>")[0]
