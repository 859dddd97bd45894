"""Issue 51.4 (docs/contract.md §10): charges per month, their formats, who sees them, and that a month adds up
to its statements to the cent."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest

from capacity.quotes import add_months
from entitlements.commitments import commitment_end
from entitlements.models import Entitlement, Price
from entitlements.prices import price_save
from entitlements.services import entitlement_grant
from tests.clients import api_client
from tests.factories import grant_kwargs, member, platform_user

pytestmark = pytest.mark.django_db
MONTH_START = datetime(2026, 10, 1, tzinfo=UTC)
PERIOD = "2026-10"


@pytest.fixture
def world(fleet):
    for term, usd in (("on_demand", "4.00"), ("1_year", "2.48")):
        price_save(
            actor=None,
            reason="test list",
            price=Price(
                accelerator=fleet.pool_a.accelerator,
                region=fleet.pool_a.region,
                term=term,
                usd_per_accelerator_hour=Decimal(usd),
                effective_from=date(2026, 1, 1),
                source="test list",
            ),
        )
    start = datetime(2026, 9, 15, tzinfo=UTC)
    acme = entitlement_grant(
        actor=fleet.operator, reason="t", **grant_kwargs(fleet.pool_a, fleet.acme, 10, start=start, days=None)
    )
    mid = datetime(2026, 10, 10, 6, tzinfo=UTC)  # starts within the month: part of it is bought
    globex = entitlement_grant(
        actor=fleet.operator,
        reason="t",
        term="1_year",
        committed_until=commitment_end("1_year", mid, None),
        **grant_kwargs(fleet.pool_a, fleet.globex, Decimal("7.5"), start=mid, days=None),
    )
    return fleet, acme, globex


def _statement_usd(client, ent: Entitlement) -> Decimal:
    end = add_months(MONTH_START, 1)
    body = client.get(
        f"/api/v1/entitlements/{ent.uuid}/statement", {"start": MONTH_START.isoformat(), "end": end.isoformat()}
    ).json()
    assert body["cost"]["term"] == ent.term
    return Decimal(str(body["cost"]["usd"]))


def test_month_adds_up_to_its_statements_to_the_cent(world):
    fleet, acme, globex = world
    op = api_client(platform_user("fin", "operator"))
    body = op.get("/api/v1/charges", {"period": PERIOD}).json()
    rows = {r["tenant"]: r for r in body["rows"]}
    assert set(rows) == {"acme", "globex"}
    statements = {"acme": _statement_usd(op, acme), "globex": _statement_usd(op, globex)}
    assert Decimal(rows["acme"]["usd_total"]) == statements["acme"] == Decimal("3401.14")
    assert Decimal(body["totals"]["usd_total"]) == sum(statements.values())
    # acme is on demand, globex committed for a year; hours bought: the whole month vs from the 10th, 06:00
    assert Decimal(rows["acme"]["usd_on_demand"]) == statements["acme"] and rows["acme"]["usd_committed"] == "0.00"
    assert (
        Decimal(rows["globex"]["usd_committed"]) == statements["globex"] and rows["globex"]["usd_on_demand"] == "0.00"
    )
    assert rows["acme"]["cu_hours_bought"] == pytest.approx(10 * 31 * 24)
    assert rows["globex"]["cu_hours_bought"] == pytest.approx(7.5 * (31 * 24 - 9 * 24 - 6))
    assert set(rows["acme"]) >= {"project", "model", "region", "traffic_class", "cu_hours_used"}
    # the committed term is priced lower per CU-hour than on demand
    per_cu_h = {t: Decimal(r["usd_total"]) / Decimal(str(r["cu_hours_bought"])) for t, r in rows.items()}
    assert per_cu_h["globex"] < per_cu_h["acme"]


def test_a_tenant_member_sees_only_their_tenant(world):
    fleet, *_ = world
    viewer = api_client(member("acme-v", fleet.acme, "viewer"))
    assert {r["tenant"] for r in viewer.get("/api/v1/charges", {"period": PERIOD}).json()["rows"]} == {"acme"}
    assert viewer.get("/api/v1/charges", {"period": PERIOD, "tenant": "globex"}).status_code == 404
    outsider = api_client(member("globex-r", fleet.globex, "requester"))
    assert {r["tenant"] for r in outsider.get("/api/v1/charges", {"period": PERIOD}).json()["rows"]} == {"globex"}
    assert api_client(platform_user("gw", "gateway")).get("/api/v1/charges", {"period": PERIOD}).status_code == 403


def test_csv_and_cloudevents(world):
    op = api_client(platform_user("fin", "operator"))
    as_json = op.get("/api/v1/charges", {"period": PERIOD}).json()
    for r in (
        op.get("/api/v1/charges", {"period": PERIOD, "format": "csv"}),
        op.get("/api/v1/charges", {"period": PERIOD}, HTTP_ACCEPT="text/csv"),
    ):
        assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(r.content.decode())))
        assert sum(Decimal(x["usd_total"]) for x in rows) == Decimal(as_json["totals"]["usd_total"])
        assert {x["period"] for x in rows} == {PERIOD}
    ev = op.get("/api/v1/charges", {"period": PERIOD, "format": "cloudevents"})
    assert ev["Content-Type"].startswith("application/cloudevents-batch+json")
    events = ev.json()
    assert len(events) == len(as_json["rows"])
    for e in events:
        assert e["specversion"] == "1.0" and e["type"] == "headroom.charge.v1"
        assert e["source"] == "/api/v1/charges" and len(e["id"]) == 32 and e["time"]
        assert set(e["data"]) >= {"cu_hours_bought", "cu_hours_used", "usd_committed", "usd_on_demand", "usd_total"}
    assert {e["subject"] for e in events} == {
        "acme/-/llama-test/us-test/reserved",
        "globex/-/llama-test/us-test/reserved",
    }
    again = op.get("/api/v1/charges", {"period": PERIOD, "format": "cloudevents"}).json()
    assert [e["id"] for e in again] == [e["id"] for e in events]  # stable ids: a re-export deduplicates


@pytest.mark.parametrize("period", ["9999-01", "2026-13", "2026-1", "Oct 2026", "", "1999-12"])
def test_a_bad_period_is_a_400_naming_it(world, period):
    op = api_client(platform_user("fin", "operator"))
    r = op.get("/api/v1/charges", {"period": period})
    assert r.status_code == 400 and "period" in r.json()["error"]["fields"]
    assert op.get("/api/v1/charges").status_code == 400
    assert op.get("/api/v1/charges", {"period": period, "format": "csv"}).status_code == 400


def test_finance_page_totals_by_tenant_and_a_weekly_chart(world):
    from tests.clients import web_client

    fleet, acme, globex = world
    op = platform_user("fin", "operator")
    body = api_client(op).get("/api/v1/charges", {"period": PERIOD}).json()
    page = web_client(op).get("/finance/", {"period": PERIOD})
    html = page.content.decode()
    assert page.status_code == 200
    assert 'data-tenant="acme"' in html and 'data-tenant="globex"' in html
    total = f"${Decimal(body['totals']['usd_total']):,.2f}"
    assert total in html
    fig = page.context["fig"]
    assert fig["layout"]["barmode"] == "stack" and {t["name"] for t in fig["data"]} == {"acme", "globex"}
    assert len(fig["data"][0]["x"]) == 5  # Oct 2026: Thu 1st to Sun 4th, then four Monday weeks (the last to the 31st)
    weekly = sum(sum(t["y"]) for t in fig["data"])
    assert weekly == pytest.approx(float(body["totals"]["usd_total"]), abs=0.05)  # weeks round to the cent each
    viewer = web_client(member("acme-v", fleet.acme, "viewer")).get("/finance/", {"period": PERIOD}).content.decode()
    assert 'data-tenant="acme"' in viewer and "globex" not in viewer
    bad = web_client(op).get("/finance/", {"period": "9999-01"})
    assert bad.status_code == 400 and "period" in bad.content.decode()


ROLE_SEES = [  # docs/contract.md §10: operators all; a tenant member their own tenant; nobody else
    ("operator", None, {"acme", "globex"}),
    ("viewer", "acme", {"acme"}),
    ("requester", "acme", {"acme"}),
    ("requester", "globex", {"globex"}),
    ("approver", None, 403),
    ("gateway", None, 403),
]


@pytest.mark.parametrize(("role", "tenant", "sees"), ROLE_SEES)
def test_who_reads_charges_api_and_page_per_role(world, role, tenant, sees):
    from tests.clients import web_client

    fleet, *_ = world
    user = member(f"{role}-{tenant}", getattr(fleet, tenant), role) if tenant else platform_user(f"p-{role}", role)
    api = api_client(user).get("/api/v1/charges", {"period": PERIOD})
    if sees == 403:
        assert api.status_code == 403
        assert api_client(user).get("/api/v1/charges", {"period": "9999-01"}).status_code == 403  # role first
        assert api_client(user).get("/api/v1/charges", {"period": PERIOD, "tenant": "acme"}).status_code == 403
        if role != "gateway":  # a gateway token cannot sign in to pages (the matrix: 404)
            assert web_client(user).get("/finance/", {"period": PERIOD}).status_code == 403
        return
    assert api.status_code == 200 and {r["tenant"] for r in api.json()["rows"]} == sees
    page = web_client(user).get("/finance/", {"period": PERIOD})
    assert page.status_code == 200
    html = page.content.decode()
    for t in ("acme", "globex"):
        assert (f'data-tenant="{t}"' in html) == (t in sees)
    for other in {"acme", "globex"} - sees:  # another tenant named: 404, as for every tenant object
        assert api_client(user).get("/api/v1/charges", {"period": PERIOD, "tenant": other}).status_code == 404
    if role == "operator":
        one = api_client(user).get("/api/v1/charges", {"period": PERIOD, "tenant": "globex"}).json()
        assert {r["tenant"] for r in one["rows"]} == {"globex"}
