"""Issue 51.2 (docs/contract.md §10): quotes per term on a launch request (API and page) and on a sizing
answer, the approval's term, the entitlement's commitment, and no amendment below it before it ends."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from capacity.quotes import add_months
from entitlements.commitments import check_amend
from entitlements.models import Accelerator, Entitlement, Pool, Price
from entitlements.prices import price_save
from entitlements.services import entitlement_amend
from tests.clients import api_client, web_client

pytestmark = pytest.mark.django_db
LIST = {"on_demand": "4.00", "1_month": "3.60", "6_month": "3.00", "1_year": "2.48", "3_year": "2.00"}


def _price(pool: Pool) -> None:
    for term, usd in LIST.items():
        row = Price(
            accelerator=pool.accelerator,
            region=pool.region,
            term=term,
            usd_per_accelerator_hour=Decimal(usd),
            effective_from=date(2026, 1, 1),
            source="test list",
        )
        price_save(actor=None, reason="test list", price=row)


def _rate(pool: Pool, term: str) -> float:
    """By hand: every accelerator of the pool at the term's price (no overheads here) ÷ deliverable CU."""
    return pool.replicas * pool.accelerators_per_replica * float(LIST[term]) / float(pool.breakdown().deliverable)


def test_request_quotes_every_term_and_no_commitment_beats_on_demand_per_month(fleet, people, submitted):
    _price(fleet.pool_a)
    body = api_client(people.approver).get(f"/api/v1/launch-requests/{submitted.uuid}").json()
    quotes = {q["term"]: q for q in body["quotes"]}
    assert list(quotes) == list(LIST)  # one row per term the list has, in term order
    cu = float(body["scenario_cu"]["committed"])
    on_demand = quotes["on_demand"]
    assert on_demand["usd_per_month"] == pytest.approx(cu * _rate(fleet.pool_a, "on_demand") * 730, abs=0.01)
    # the 30-day window pays its own hours on demand, whole terms otherwise
    assert on_demand["usd_total"] == pytest.approx(cu * _rate(fleet.pool_a, "on_demand") * 30 * 24, abs=0.01)
    assert quotes["6_month"]["usd_total"] == pytest.approx(cu * _rate(fleet.pool_a, "6_month") * 6 * 730, abs=0.01)
    start = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)
    assert quotes["1_year"]["commitment_end"][:10] == add_months(start, 12).date().isoformat()
    assert on_demand["commitment_end"] is None
    per_m = on_demand["usd_per_million_useful_output_tokens"]
    for term, q in quotes.items():
        assert q["usd_per_month"] <= on_demand["usd_per_month"]
        # the same useful tokens at each term's price: the figure scales with the term's $ per CU-hour
        want = per_m * _rate(fleet.pool_a, term) / _rate(fleet.pool_a, "on_demand")
        assert q["usd_per_million_useful_output_tokens"] == pytest.approx(want, abs=2e-4), term
    cheapest = [t for t, q in quotes.items() if q["cheapest"]]
    assert cheapest == [min(quotes, key=lambda t: quotes[t]["usd_total"])]


def test_approval_records_the_term_and_the_commitment_refuses_amending_below(fleet, people, submitted):
    _price(fleet.pool_a)
    c = api_client(people.approver)
    bad = c.post(f"/api/v1/launch-requests/{submitted.uuid}/approve", {"term": "2_year"}, format="json")
    assert bad.status_code == 400 and "term" in bad.json()["error"]["fields"]
    assert not Entitlement.objects.exists()
    quotes = {q["term"]: q for q in c.get(f"/api/v1/launch-requests/{submitted.uuid}").json()["quotes"]}
    ok = c.post(f"/api/v1/launch-requests/{submitted.uuid}/approve", {"term": "1_year"}, format="json")
    assert ok.status_code == 200, ok.content
    ent = Entitlement.objects.get()
    assert ent.term == "1_year"
    assert ent.committed_until.isoformat()[:10] == quotes["1_year"]["commitment_end"][:10]
    assert ok.json()["events"][-1]["changes"]["term"] == "1_year"
    entitlement = api_client(people.requester).get(f"/api/v1/entitlements/{ent.uuid}").json()
    assert entitlement["term"] == "1_year" and entitlement["committed_until"] is not None
    less = ent.cu - Decimal("1")
    with pytest.raises(ValidationError) as e:
        entitlement_amend(actor=people.operator, reason="smaller", entitlement=ent, cu=less)
    assert ent.committed_until.date().isoformat() in e.value.message_dict["cu"][0]
    api = api_client(people.operator).patch(
        f"/api/v1/entitlements/{ent.uuid}", {"cu": str(less), "reason": "smaller"}, format="json"
    )
    assert api.status_code == 400 and ent.committed_until.date().isoformat() in str(api.json())
    assert Entitlement.objects.get().cu == ent.cu  # nothing changed
    more = entitlement_amend(actor=people.operator, reason="bigger", entitlement=ent, cu=ent.cu + 1)
    assert more.cu == ent.cu + 1
    check_amend(more, {"cu": less}, now=more.committed_until + timedelta(seconds=1))  # after it ends: allowed


def test_page_shows_the_quotes_and_the_approver_chooses_a_term(fleet, people, submitted):
    _price(fleet.pool_a)
    page = web_client(people.approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert 'id="quotes"' in page and "cheapest for this window" in page
    for words in ("on demand", "1 month", "6 months", "1 year", "3 years"):
        assert words in page
    assert "1_year" not in page.replace('value="1_year"', "").replace('data-term="1_year"', "")
    r = web_client(people.approver).post(f"/launch/{submitted.uuid}/approve", {"term": "6_month", "comment": ""})
    assert r.status_code == 302
    assert Entitlement.objects.get().term == "6_month"


def test_sizing_answer_quotes_the_cu_it_recommends(fleet, people):
    _price(fleet.pool_a)
    payload = {
        "model": fleet.pool_a.model.slug,
        "arrival_rate_rps": 5,
        "prompt_tokens": {"mean": 1000, "p50": 800, "p95": 3000, "p99": 5000},
        "output_tokens": {"mean": 200, "p50": 150, "p95": 600, "p99": 900},
        "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2},
    }
    Accelerator.objects.update(cloud_on_demand_per_hour=99.0)  # the catalogue's price: the list's row wins (§10)
    c = api_client(people.viewer)
    r = c.post("/api/v1/sizing", payload, format="json")
    body = r.json()
    assert r.status_code == 200, body
    quotes = {q["term"]: q for q in body["quotes"]}
    assert len(quotes) >= 3 and list(quotes) == list(LIST)
    cu = body.get("cu_to_buy") or body["capacity_units"]
    assert body["quotes_basis"]["cu"] == cu
    assert quotes["on_demand"]["usd_per_month"] == pytest.approx(cu * _rate(fleet.pool_a, "on_demand") * 730, abs=0.01)
    for q in quotes.values():
        assert q["usd_per_month"] <= quotes["on_demand"]["usd_per_month"]
    assert sum(q["cheapest"] for q in quotes.values()) == 1
    for field, value in (("region", "nowhere"), ("quote_months", 0), ("quote_months", 37)):
        bad = c.post("/api/v1/sizing", {**payload, field: value}, format="json")
        assert bad.status_code == 400 and field in bad.json()["error"]["fields"]
