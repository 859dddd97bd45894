"""Issue 51 review (docs/contract.md §10): the sizing answer's `cost` and its quotes read one $ basis, the price
list's row for the accelerator × region × term (on demand unless `term` is given) plus the catalogue's overheads,
the same chip a pool is priced with (entitlements.pool_price). A price-list row moves them by exactly the
expected amount; the catalogue's own price alone moves nothing."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from entitlements.models import Accelerator, Pool, Price
from entitlements.prices import price_save
from tests.clients import api_client
from tests.factories import member

pytestmark = pytest.mark.django_db
LIST = {"on_demand": "4.00", "1_month": "3.60", "6_month": "3.00", "1_year": "2.48", "3_year": "2.00"}
PAYLOAD = {
    "arrival_rate_rps": 5,
    "prompt_tokens": {"mean": 1000, "p50": 800, "p95": 3000, "p99": 5000},
    "output_tokens": {"mean": 200, "p50": 150, "p95": 600, "p99": 900},
    "slo": {"ttft_p99_s": 2.0, "tpot_p99_s": 0.2},
}


def _save(pool: Pool, term: str, usd: str) -> None:
    row = Price.objects.filter(accelerator=pool.accelerator, region=pool.region, term=term).first() or Price(
        accelerator=pool.accelerator,
        region=pool.region,
        term=term,
        effective_from=date(2026, 1, 1),
        source="test list",
    )
    row.usd_per_accelerator_hour = Decimal(usd)
    price_save(actor=None, reason="test list", price=row)


@pytest.fixture
def priced(fleet):
    # overheads the chip's price is added to (host + network + storage, software): counted once, unchanged
    Accelerator.objects.filter(pk=fleet.pool_a.accelerator_id).update(
        host_cost_per_hour=0.4, network_cost_per_hour=0.1, storage_cost_per_hour=0.05, software_cost_per_hour=0.2
    )
    for term, usd in LIST.items():
        _save(fleet.pool_a, term, usd)
    return fleet


def _size(client, pool: Pool, **extra) -> dict:
    r = client.post("/api/v1/sizing", {**PAYLOAD, "model": pool.model.slug, **extra}, format="json")
    assert r.status_code == 200, r.json()
    return r.json()


def _quotes(body: dict) -> dict[str, float]:
    return {q["term"]: q["usd_per_month"] for q in body["quotes"]}


def _pool_accelerators(pool: Pool) -> int:
    return pool.replicas * pool.accelerators_per_replica


def test_sizing_cost_and_quotes_move_with_the_price_list_exactly(priced):
    pool = Pool.objects.get(pk=priced.pool_a.pk)
    c = api_client(member("v", priced.acme, "viewer"))
    before = _size(c, pool)
    n = before["accelerators"]
    per_acc = 4.00 + 0.4 + 0.1 + 0.05 + 0.2  # the on-demand row plus the overheads, nothing from the catalogue
    assert before["cost"]["per_hour"] == pytest.approx(n * per_acc)
    assert any("priced from the price list, on demand in us-test: $4.0000" in a for a in before["assumptions"])

    _save(pool, "on_demand", "5.25")  # +1.25 per accelerator-hour
    after = _size(c, pool)
    assert after["accelerators"] == n
    assert after["cost"]["per_hour"] - before["cost"]["per_hour"] == pytest.approx(n * 1.25)
    ratio = after["cost"]["per_hour"] / before["cost"]["per_hour"]
    assert after["cost"]["per_million_useful_output_tokens"] == pytest.approx(
        before["cost"]["per_million_useful_output_tokens"] * ratio
    )
    cu = before["quotes_basis"]["cu"]
    moved = {t: _quotes(after)[t] - _quotes(before)[t] for t in LIST}
    deliverable = float(pool.breakdown().deliverable)
    assert moved["on_demand"] == pytest.approx(cu * 1.25 * _pool_accelerators(pool) / deliverable * 730, abs=0.011)
    assert all(moved[t] == 0 for t in LIST if t != "on_demand")

    _save(pool, "1_year", "2.00")  # a commitment row moves its own quote only, and `cost` only at that term
    committed = _size(c, pool)
    assert committed["cost"]["per_hour"] == pytest.approx(after["cost"]["per_hour"])
    assert _quotes(after)["1_year"] - _quotes(committed)["1_year"] == pytest.approx(
        cu * 0.48 * _pool_accelerators(pool) / deliverable * 730, abs=0.011
    )
    at_term = _size(c, pool, term="1_year")
    assert at_term["cost"]["per_hour"] == pytest.approx(n * (2.00 + 0.75))


def test_the_catalogue_price_alone_moves_nothing(priced):
    pool = Pool.objects.get(pk=priced.pool_a.pk)
    c = api_client(member("v", priced.acme, "viewer"))
    before = _size(c, pool)
    Accelerator.objects.update(
        cloud_on_demand_per_hour=99.0, cloud_reserved_per_hour=50.0, purchase_price_usd=500_000, power_watts=2_000
    )
    after = _size(c, pool)
    for key in ("per_hour", "per_million_useful_output_tokens", "marginal_per_million_output_tokens"):
        assert after["cost"][key] == before["cost"][key]
    assert after["quotes"] == before["quotes"]
    for pricing in ("on_demand", "reserved", "purchased"):  # the list's row stands whatever basis is asked
        assert _size(c, pool, cost={"pricing": pricing})["cost"]["per_hour"] == before["cost"]["per_hour"]


def test_no_row_keeps_the_catalogue_basis_and_a_bad_term_is_a_400(fleet):
    pool = Pool.objects.get(pk=fleet.pool_a.pk)
    Accelerator.objects.update(cloud_on_demand_per_hour=3.0)
    c = api_client(member("v", fleet.acme, "viewer"))
    body = _size(c, pool)
    assert body["cost"]["per_hour"] == pytest.approx(body["accelerators"] * 3.0)
    assert any("priced from the catalogue" in a for a in body["assumptions"])
    for field, value in (("term", "2_year"), ("term", 12), ("region", "nowhere")):
        bad = c.post("/api/v1/sizing", {**PAYLOAD, "model": pool.model.slug, field: value}, format="json")
        assert bad.status_code == 400 and field in bad.json()["error"]["fields"]
    assert _size(c, pool, region=pool.region.slug, term="on_demand")["cost"] == body["cost"]


def test_the_calculator_page_shows_the_apis_cost_and_quotes(priced):
    from tests.clients import web_client
    from tests.sizing.test_page import FORM, HTMX

    pool = Pool.objects.get(pk=priced.pool_a.pk)
    user = member("v", priced.acme, "viewer")
    form = {**FORM, "model": pool.model.slug, "failure_policy": "none", "zones": "1"}
    page = web_client(user).get("/sizing/", form, **HTMX)
    assert page.status_code == 200
    html = page.content.decode()
    answer, quotes = page.context["sizing"], page.context["quotes"]
    assert [q["term"] for q in quotes["rows"]] == list(LIST) and 'id="quotes"' in html
    for words in ("on demand", "1 month", "6 months", "1 year", "3 years"):
        assert words in html
    per_acc = 4.00 + 0.75
    assert answer["cost"]["per_hour"] == pytest.approx(answer["accelerators"] * per_acc)  # the list's row, as the API
    od = next(q for q in quotes["rows"] if q["term"] == "on_demand")
    assert all(q["usd_per_month"] <= od["usd_per_month"] for q in quotes["rows"])
