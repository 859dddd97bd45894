"""Live pages, their htmx partials and the CSV export: who sees what (404 for everyone else)."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from entitlements.services import entitlement_grant
from telemetry.services import fleet_samples_ingest, ingest_events
from tests.factories import grant_kwargs
from tests.figures import figures
from tests.telemetry.helpers import client_for, event, person

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def world(fleet):
    """acme: a member and a teammate, one entitlement and traffic; globex: an outsider with its own traffic."""
    now = timezone.now()
    ent = entitlement_grant(
        **grant_kwargs(fleet.pool_a, fleet.acme, Decimal("1"), start=now - timedelta(days=1)),
        actor=fleet.operator,
        reason="test",
    )
    ts = (now - timedelta(minutes=2)).isoformat()
    ingest_events(
        source="admission",
        events=[
            event(1, ts=ts, entitlement=str(ent.uuid)),
            event(2, ts=ts, entitlement=str(ent.uuid), decision="throttle", reason="QUOTA_EXCEEDED"),
            event(3, ts=ts, decision="throttle", reason="PLATFORM_CAPACITY"),
            event(4, ts=ts, tenant="globex"),
            event(5, ts=ts, tenant="globex"),
            event(6, ts=ts, tenant="globex"),
        ],
    )
    fleet_samples_ingest(
        source="gw",
        samples=[
            {
                "pool": "pool-a",
                "ts": ts,
                "replicas_healthy": 3,
                "replicas_total": 4,
                "accelerator_util": 0.5,
                "kv_cache_usage": 0.25,
            }
        ],
    )
    return {
        "ent": ent,
        "member": client_for(person("member", tenant=fleet.acme, role="requester")),
        "teammate": client_for(person("teammate", tenant=fleet.acme)),
        "outsider": client_for(person("outsider", tenant=fleet.globex)),
        "operator": client_for(fleet.operator),
        "approver": client_for(person("approver", platform="approver")),
        "gateway": client_for(person("gw", platform="gateway")),
    }


def test_entitlement_page_for_its_tenant_and_staff_only(world):
    url = f"/entitlements/{world['ent'].uuid}/"
    for who in ("member", "teammate", "operator", "approver"):
        r = world[who].get(url)
        assert r.status_code == 200, who
        assert {"ent-rate", "ent-tokens"} <= figures(r.content.decode()).keys()
    for who in ("outsider", "gateway"):
        assert world[who].get(url).status_code == 404, who
        assert world[who].get(url, **HTMX).status_code == 404, who
        assert world[who].get(url + "?range=90d", **HTMX).status_code == 404, who


def test_entitlement_partial_is_the_panels_alone(world):
    r = world["member"].get(f"/entitlements/{world['ent'].uuid}/?range=15m", **HTMX)
    body = r.content.decode()
    assert r.status_code == 200
    assert body.lstrip().startswith('<section id="entitlement-panels"')
    assert "<html" not in body
    assert 'hx-trigger="every 5s"' in body
    # the two attributed events plus the unattributed platform throttle of the same scope
    assert r.context["totals"]["arrived"] == 3
    assert (r.context["totals"]["tenant_throttled"], r.context["totals"]["platform_throttled"]) == (1, 1)


def test_usage_page_shows_own_tenant_only(world):
    mine = world["member"].get("/usage/")
    theirs = world["outsider"].get("/usage/")
    assert (mine.status_code, theirs.status_code) == (200, 200)
    assert mine.context["totals"]["arrived"] == 3
    assert theirs.context["totals"]["arrived"] == 3 and theirs.context["totals"]["tenant_throttled"] == 0
    assert theirs.context["tenant"].slug == "globex"
    assert b"We were short" in mine.content and b"You hit your quota" in mine.content


def test_usage_page_partial_and_export_of_another_tenant_are_404(world):
    for url in ("/usage/?tenant=acme", "/usage/export.csv?tenant=acme", "/usage/?tenant=nope"):
        assert world["outsider"].get(url).status_code == 404, url
        assert world["outsider"].get(url, **HTMX).status_code == 404, url
    assert world["gateway"].get("/usage/").status_code == 404
    assert world["gateway"].get("/usage/export.csv").status_code == 404


def test_usage_export_counts_own_tenant_and_splits_blame(world):
    r = world["teammate"].get("/usage/export.csv?range=15m")
    assert r.status_code == 200 and r["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(r.streaming_content).decode())))
    # 15 minutes from a start floored to the minute: 16 one-minute rows, 15 only if now is on the minute
    gaps = {
        (datetime.fromisoformat(b["t"]) - datetime.fromisoformat(a["t"])).total_seconds()
        for a, b in zip(rows, rows[1:])
    }
    assert gaps == {60.0} and len(rows) in (15, 16)
    assert sum(int(x["arrived_requests"]) for x in rows) == 3
    assert sum(int(x["throttled_tenant_caused"]) for x in rows) == 1
    assert sum(int(x["throttled_platform_caused"]) for x in rows) == 1
    assert sum(int(x["throttled_QUOTA_EXCEEDED"]) for x in rows) == 1
    assert {x["entitled_wt_per_s"] for x in rows} == {"1000.0"}


def test_staff_usage_reads_any_tenant(world):
    r = world["approver"].get("/usage/?tenant=globex&range=1h")
    assert r.status_code == 200 and r.context["totals"]["arrived"] == 3
    assert world["operator"].get("/usage/").context["totals"]["arrived"] == 6


def test_fleet_page_is_for_staff(world):
    for who in ("member", "teammate", "outsider", "gateway"):
        assert world[who].get("/fleet/").status_code == 404, who
        assert world[who].get("/fleet/", **HTMX).status_code == 404, who
    r = world["operator"].get("/fleet/")
    assert r.status_code == 200
    pool = next(p for p in r.context["pools"] if p["slug"] == "pool-a")
    assert (pool["healthy"], pool["total"], pool["util"], pool["kv"]) == (3, 4, 0.5, 0.25)
    assert r.context["totals"]["platform_throttled"] == 1 and r.context["totals"]["tenant_throttled"] == 1
    partial = world["approver"].get("/fleet/?range=7d", **HTMX)
    assert partial.content.decode().lstrip().startswith('<section id="fleet-panels"')
    assert "hx-trigger" not in partial.content.decode()  # a 7-day view reads hourly rollups: no polling


def test_range_picker_reads_the_right_level(world):
    levels = {k: world["member"].get(f"/usage/?range={k}").context["level"] for k in ("15m", "6h", "24h", "7d", "90d")}
    assert levels == {"15m": "minute", "6h": "minute", "24h": "hour", "7d": "hour", "90d": "day"}


def test_metrics_report_decisions_by_reason(world):
    body = world["gateway"].get("/metrics").content.decode()
    assert (
        'headroom_admission_decisions_total{decision="throttle",reason="QUOTA_EXCEEDED",responsible="tenant"} 1.0'
        in body
    )
    assert 'headroom_admission_decisions_total{decision="admit",reason="",responsible=""} 4.0' in body
    assert "headroom_ingest_lag_seconds_bucket" in body
