"""Availability before asking (issue 52, docs/contract.md §11): every pool serving the model, the approval's
own figure (approving exactly it succeeds, 0.001 CU more is refused), the first date the ask fits counting
commitments that end and orders placed, the replicas for the rest, the forecast's warning, no other
tenant's name, and a bounded number of queries.

Fleet (tests.factories.build_fleet): pool-a and pool-b in us-test, 4 replicas × 70 CU = 280 CU each, no
deductions; eu_pool adds pool-eu (280 CU) in eu-test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from entitlements.models import Region, TrafficClass
from entitlements.services import OversellError, entitlement_grant
from forecasting.models import ForecastRun, PoolDemand, SupplyOrder
from portal.availability import Ask, availability
from portal.services import intake
from tests import factories as f

pytestmark = pytest.mark.django_db


def midnight(d):
    return datetime.combine(d, datetime.min.time(), tzinfo=UTC)


def today():
    return timezone.now().date()


def sell(pool, tenant, cu, *, start=None, days=30):
    """pool-b's grants are of the shared class: one scope lives in one pool, and globex sells in both."""
    start = start or timezone.now() - timedelta(hours=1)
    tc = "shared" if pool.slug == "pool-b" else "reserved"
    kw = f.grant_kwargs(pool, tenant, cu, start=start, days=days, traffic_class=tc)
    return entitlement_grant(actor=None, reason="test", **kw)


def ask(fleet, cu, *, regions=("us-test",), start=None, until=None, tc="reserved", tenant=None):
    return Ask(
        model=fleet.pool_a.model,
        regions=[Region.objects.get(slug=s) for s in regions],
        cu=Decimal(str(cu)),
        start=start or today(),
        until=until,
        traffic_class=TrafficClass.objects.get(slug=tc),
        tenant=tenant,
    )


def by_pool(rows):
    return {r.pool.slug: r for r in rows}


def test_every_serving_pool_listed_asked_region_first_none_above_headroom(fleet, eu_pool):
    other = f.OperatingPointFactory(model=f.ServedModelFactory(slug="other-model"))
    f.make_pool("pool-other", op=other)  # serves another model: not listed
    sell(fleet.pool_a, fleet.globex, 200)
    rows = availability(ask(fleet, 10, regions=("eu-test",), until=today() + timedelta(days=30)), today=today())
    assert [r.pool.slug for r in rows] == ["pool-eu", "pool-a", "pool-b"]
    got = by_pool(rows)
    assert got["pool-a"].available_cu == Decimal("80.000")
    assert got["pool-b"].available_cu == got["pool-eu"].available_cu == Decimal("280.000")
    for r in rows:
        assert r.available_cu <= r.pool.deliverable_cu
    assert got["pool-eu"].best  # fits, in the asked region


@pytest.mark.parametrize("via", ["grant", "launch approval"])
def test_available_is_exactly_what_approval_allows(fleet, people, draft, via):
    """Approve the figure plus 0.001 CU: refused; the figure itself: granted."""
    sell(fleet.pool_a, fleet.globex, Decimal("262.5"), start=timezone.now() - timedelta(days=1), days=60)
    sell(fleet.pool_b, fleet.globex, Decimal("270.25"), start=timezone.now() - timedelta(days=1), days=60)
    until = today() + timedelta(days=30)
    row = by_pool(availability(ask(fleet, 26, until=until, tenant=fleet.acme), today=today()))["pool-a"]
    assert row.available_cu == Decimal("17.500")
    assert not row.fits and "8.500 CU short" in row.why
    more = row.available_cu + Decimal("0.001")
    if via == "grant":
        kw = f.grant_kwargs(fleet.pool_a, fleet.acme, more, start=midnight(today()), days=30)
        with pytest.raises(OversellError), transaction.atomic():
            entitlement_grant(actor=None, reason="one step more", **kw)
        kw["cu"] = row.available_cu
        assert entitlement_grant(actor=None, reason="exactly", **kw).cu == row.available_cu
    else:
        req = intake.launch_request_submit(actor=people.requester, request=draft)
        decide = {"actor": people.approver, "request": req, "comment": "what is there", "pools": {"us-test": "pool-a"}}
        with pytest.raises(intake.HeadroomGone), transaction.atomic():
            intake.launch_request_partially_approve(region_cu={"us-test": str(more)}, **decide)
        intake.launch_request_partially_approve(region_cu={"us-test": str(row.available_cu)}, **decide)
        assert req.region_rows.get().approved_cu == row.available_cu
    after = by_pool(availability(ask(fleet, 1, until=until), today=today()))["pool-a"]
    assert after.available_cu == 0


def test_scope_home_elsewhere_allows_nothing_and_names_no_other_tenant(fleet):
    sell(fleet.pool_a, fleet.acme, 10)  # acme's reserved scope in us-test lives in pool-a
    sell(fleet.pool_b, fleet.globex, 100)
    rows = by_pool(availability(ask(fleet, 20, tenant=fleet.acme), today=today()))
    assert rows["pool-b"].available_cu == 0 and not rows["pool-b"].fits
    assert "already lives in another pool" in rows["pool-b"].why
    # The approval agrees: a grant naming pool-b is refused.
    with pytest.raises(ValidationError), transaction.atomic():
        entitlement_grant(actor=None, reason="x", **f.grant_kwargs(fleet.pool_b, fleet.acme, 1))
    assert rows["pool-a"].best and "already lives here" in rows["pool-a"].why
    for r in rows.values():
        assert "globex" not in r.why


def test_available_from_when_a_commitment_ends_and_the_window_shifts(fleet):
    start = midnight(today()) - timedelta(days=1)
    sell(fleet.pool_a, fleet.globex, 250, start=start, days=11)  # ends at midnight, day 10 from today
    sell(fleet.pool_b, fleet.globex, 250, start=start + timedelta(hours=5), days=11)  # ends 05:00 on day 10
    rows = by_pool(availability(ask(fleet, 40, until=today() + timedelta(days=7)), today=today()))
    assert rows["pool-a"].available_from == today() + timedelta(days=10)
    assert rows["pool-b"].available_from == today() + timedelta(days=11)  # day 10 still holds it until 05:00
    assert "as commitments end" in rows["pool-a"].why
    # A later commitment inside the shifted window pushes the date past it.
    sell(fleet.pool_a, fleet.globex, 250, start=midnight(today()) + timedelta(days=14), days=30)
    row = by_pool(availability(ask(fleet, 40, until=today() + timedelta(days=7)), today=today()))["pool-a"]
    assert row.available_from == today() + timedelta(days=44)


def test_available_from_counts_orders_and_replicas_to_add(fleet):
    sell(fleet.pool_a, fleet.globex, 270, days=None)  # open-ended: only new supply helps
    arrival = today() + timedelta(days=20)
    SupplyOrder.objects.create(pool=fleet.pool_a, replicas=2, arrival_date=arrival, status="ordered")
    SupplyOrder.objects.create(pool=fleet.pool_a, replicas=9, arrival_date=arrival, status="cancelled")
    row = by_pool(availability(ask(fleet, 80), today=today()))["pool-a"]
    assert row.available_cu == Decimal("10.000")
    assert row.replicas_to_add == 1  # 70 short, 70 CU per replica
    assert row.available_from == arrival and "replicas ordered" in row.why
    big = by_pool(availability(ask(fleet, 160), today=today()))["pool-a"]
    assert big.replicas_to_add == 3 and big.available_from is None  # 2 ordered give 140 more: 150 short
    fits = by_pool(availability(ask(fleet, 10), today=today()))["pool-a"]
    assert fits.replicas_to_add == 0 and fits.available_from == today()


def test_forecast_expected_demand_eating_the_room_is_said(fleet):
    run = ForecastRun.objects.create(status="succeeded", progress=100, finished_at=timezone.now())
    start = midnight(today())
    hourly = [100.0] * (8 * 168) + [277.9] * (18 * 168)  # from week 8 the expected demand takes nearly all
    PoolDemand.objects.create(run=run, pool=fleet.pool_a, start=start, tenants={"globex": 1.0},
                              hourly={"expected": hourly, "upside": hourly, "stress": hourly})  # fmt: skip
    rows = by_pool(availability(ask(fleet, 10), today=today()))
    a = rows["pool-a"]
    month = (start + timedelta(weeks=8)).strftime("%B %Y")
    assert a.fits and a.why.startswith(f"fits today; expected demand leaves 2.100 CU by {month}")
    assert a.available_cu == Decimal("280.000")  # the approval's figure is untouched
    assert rows["pool-b"].best and not a.best
    assert "globex" not in a.why
    # A window ending before the demand arrives is not warned about.
    short = by_pool(availability(ask(fleet, 10, until=today() + timedelta(days=30)), today=today()))["pool-a"]
    assert short.why.startswith("fits:")


def test_best_effort_fits_anywhere(fleet):
    sell(fleet.pool_a, fleet.globex, 280)
    rows = availability(ask(fleet, 50, tc="best_effort"), today=today())
    assert all(r.fits for r in rows) and by_pool(rows)["pool-b"].best


def test_queries_do_not_grow_with_pools_or_entitlements(fleet, eu_pool):
    def count():
        with CaptureQueriesContext(connection) as c:
            availability(ask(fleet, 300, tenant=fleet.acme), today=today())
        return len(c.captured_queries)

    """One query per pool set: the count is the same with 1 or 6 pools, 1 or 40 entitlements, with orders
    and pool demand or without (taking headroom_rows' one query out for a read per pool fails it)."""
    sell(fleet.pool_a, fleet.globex, 200)
    run = ForecastRun.objects.create(status="succeeded", progress=100, finished_at=timezone.now())
    few = count()
    pools = [f.make_pool(f"more-{i}", op=fleet.pool_a.operating_point, region=eu_pool.region) for i in range(4)]
    tenants = [f.TenantFactory(slug=f"t{i}") for i in range(5)]  # one scope, one pool: a tenant per pool
    for i in range(39):
        sell([eu_pool, *pools][i % 5], tenants[i % 5], 1, start=timezone.now() + timedelta(days=i), days=20)
    for p in pools[:2]:
        SupplyOrder.objects.create(pool=p, replicas=1, arrival_date=today() + timedelta(days=9), status="ordered")
    for p in pools:
        PoolDemand.objects.create(
            run=run, pool=p, start=midnight(today()), tenants={}, hourly={"expected": [1.0] * 168}
        )
    assert count() == few


# --- the API ----------------------------------------------------------------------------------


def test_api_rows_for_a_tenant_name_no_other_tenant(fleet, people, eu_pool):
    from tests.clients import api_client

    sell(fleet.pool_a, fleet.globex, 200)
    until = (today() + timedelta(days=30)).isoformat()
    r = api_client(people.requester).get(
        "/api/v1/availability", {"model": "llama-test", "region": "eu-test", "cu": "100", "until": until}
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert [row["pool"] for row in body["rows"]] == ["pool-eu", "pool-a", "pool-b"]
    a = next(row for row in body["rows"] if row["pool"] == "pool-a")
    assert a["available_cu"] == "80.000" and a["replicas_to_add"] == 1 and a["region"] == "us-test"
    assert set(a) == {
        "pool",
        "region",
        "accelerator",
        "available_cu",
        "available_from",
        "replicas_to_add",
        "why",
        "best",
    }
    assert b"globex" not in r.content


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"model": "nope", "cu": "1"}, "model"),
        ({"cu": "1"}, "model"),
        ({"model": "llama-test", "cu": "-1"}, "cu"),
        ({"model": "llama-test", "cu": "0"}, "cu"),
        ({"model": "llama-test", "cu": "1e30"}, "cu"),
        ({"model": "llama-test", "cu": "lots"}, "cu"),
        ({"model": "llama-test"}, "cu"),
        ({"model": "llama-test", "cu": "1", "region": "mars"}, "region"),
        ({"model": "llama-test", "cu": "1", "traffic_class": "gold"}, "traffic_class"),
        ({"model": "llama-test", "cu": "1", "from": "2020-01-01"}, "from"),
        ({"model": "llama-test", "cu": "1", "from": "soon"}, "from"),
        ({"model": "llama-test", "cu": "1", "from": "9999-01-01", "until": "9999-02-01"}, "from"),
        ({"model": "llama-test", "cu": "1", "until": "2020-01-01"}, "until"),
        ({"model": "llama-test", "cu": "1", "until": "+401"}, "until"),
    ],
)
def test_api_bad_input_is_a_400_naming_the_field(fleet, people, query, field):
    from tests.clients import api_client

    if query.get("until") == "+401":
        query = {**query, "until": (today() + timedelta(days=401)).isoformat()}
    r = api_client(people.requester).get("/api/v1/availability", query)
    assert r.status_code == 400, r.content
    assert field in r.json()["error"]["fields"], r.json()


def test_api_is_for_people_signed_in(fleet, people):
    from rest_framework.test import APIClient

    from tests.clients import api_client

    q = {"model": "llama-test", "cu": "1"}
    assert APIClient().get("/api/v1/availability", q).status_code in (401, 403)
    assert api_client(people.gateway).get("/api/v1/availability", q).status_code == 403
    assert api_client(people.approver).get("/api/v1/availability", q).status_code == 200
    exactly_400 = (today() + timedelta(days=400)).isoformat()
    assert api_client(people.viewer).get("/api/v1/availability", {**q, "until": exactly_400}).status_code == 200


# --- the launch form and the review ---------------------------------------------------------------


def _form(fleet, **over):
    from tests.portal.intake.launch_fields import complete_fields

    data = complete_fields(fleet)
    data = {k: v for k, v in data.items() if v is not None}
    data["model"] = "llama-test"
    data["regions"] = ["us-test"]
    return {**data, **over}


def test_launch_form_rows_follow_what_is_typed(fleet, people, eu_pool):
    from tests.clients import web_client

    sell(fleet.pool_a, fleet.globex, 270)
    c = web_client(people.requester)
    resp = c.post("/launch/availability", _form(fleet), HTTP_HX_REQUEST="true")
    assert resp.status_code == 200
    html = resp.content.decode()
    # 28.300 CU committed (conftest): pool-a has 10 left, pool-b all 280, pool-eu in another region.
    assert 'data-pool="pool-a"' in html and 'data-pool="pool-b"' in html and 'data-pool="pool-eu"' in html
    assert html.index('data-pool="pool-b"') < html.index('data-pool="pool-eu"')
    rows = {p: html.split(f'data-pool="{p}"')[1].split("</tr>")[0] for p in ("pool-a", "pool-b", "pool-eu")}
    assert "best-mark" in rows["pool-b"] and "best-mark" not in rows["pool-a"] + rows["pool-eu"]
    assert 'data-region="eu-test"' in html  # the alternative region can be asked for instead
    assert "globex" not in html
    # Nothing to place yet: says what is missing, no error.
    resp = c.post("/launch/availability", {"title": "x"}, HTTP_HX_REQUEST="true")
    assert resp.status_code == 200 and "Fill in the model" in resp.content.decode()


def test_the_review_shows_the_rows_at_review_time(fleet, people, submitted):
    from tests.clients import web_client

    sell(fleet.pool_b, fleet.globex, 270)
    html = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert 'id="availability-rows"' in html
    row = html.split('data-pool="pool-b"')[1].split("</tr>")[0]
    assert "10.000" in row and "18.300 CU short" in row
    # The requester's own view of the request has the decision section, and the rows, only for approvers.
    assert (
        'id="availability-rows"' not in web_client(people.requester).get(f"/launch/{submitted.uuid}/").content.decode()
    )


# --- filing against an alternative -------------------------------------------------------------------


@pytest.fixture
def h200_pool(fleet):
    """Another accelerator serving the model in us-test: 4 replicas × 70 CU = 280 CU."""
    op = f.OperatingPointFactory(model=fleet.pool_a.model, accelerator=f.AcceleratorFactory(slug="h200-test"))
    return f.make_pool("pool-h200", op=op, region=fleet.pool_a.region, replicas_per_zone=(2, 2))


def test_the_form_offers_another_accelerator_in_the_region(fleet, people, h200_pool):
    from tests.clients import web_client

    sell(fleet.pool_a, fleet.globex, 270)
    html = web_client(people.requester).post("/launch/availability", _form(fleet), HTTP_HX_REQUEST="true")
    row = html.content.decode().split('tr data-pool="pool-h200"')[1].split("</tr>")[0]
    assert 'class="secondary outline alt-pool"' in row and 'data-region="us-test"' in row
    assert ">File against pool-h200 (h200-test)</button>" in row
    # Filed against it: the row says so and offers nothing more.
    html = web_client(people.requester).post(
        "/launch/availability", _form(fleet, proposed_pool="pool-h200"), HTTP_HX_REQUEST="true"
    )
    row = html.content.decode().split('tr data-pool="pool-h200"')[1].split("</tr>")[0]
    assert "(filed against)" in row and "alt-pool" not in row


def test_a_request_filed_against_another_accelerator_is_granted_there(fleet, people, h200_pool):
    """pool-b has the most headroom (the pool rule's pick); the request names pool-h200: the approval,
    naming no pool, grants there, and the review shows the same rows with it marked and defaulted."""
    from tests.clients import web_client
    from tests.portal.intake.launch_fields import complete_fields

    req = intake.launch_request_create(actor=people.requester, **complete_fields(fleet, proposed_pool=h200_pool))
    intake.launch_request_submit(actor=people.requester, request=req)
    html = web_client(people.approver).get(f"/launch/{req.uuid}/").content.decode()
    row = html.split('id="availability-rows"')[1].split('data-pool="pool-h200"')[1].split("</tr>")[0]
    assert "(filed against)" in row and "280.000" in row
    intake.launch_request_approve(actor=people.approver, request=req, comment="as filed")
    assert req.region_rows.get().entitlement.pool == h200_pool
    assert web_client(people.requester).get(f"/api/v1/launch-requests/{req.uuid}").json()["proposed_pool"] == (
        "pool-h200"
    )


def test_a_proposed_pool_outside_the_request_is_refused_naming_it(fleet, people, eu_pool):
    from tests.portal.intake.launch_fields import complete_fields

    req = intake.launch_request_create(actor=people.requester, **complete_fields(fleet, proposed_pool=eu_pool))
    with pytest.raises(ValidationError) as err:
        intake.launch_request_submit(actor=people.requester, request=req)
    assert "proposed_pool" in err.value.message_dict
    assert "pool-eu does not serve llama-test in the request's regions (us-test)" in str(err.value)
