"""Issue 51.1 (docs/contract.md §10): the price list, its API, its audited edits, and the pool's one $ basis."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Accelerator, Pool, Price, PriceChange
from entitlements.prices import price_delete, price_save
from tests.clients import api_client, web_client
from tests.factories import member, platform_user

pytestmark = pytest.mark.django_db


def _row(pool: Pool, term: str, usd: str, **kw) -> Price:
    return Price(
        accelerator=pool.accelerator,
        region=pool.region,
        term=term,
        usd_per_accelerator_hour=Decimal(usd),
        effective_from=kw.pop("effective_from", date(2026, 1, 1)),
        source=kw.pop("source", "test list"),
    )


def test_save_audits_who_and_why_and_the_change(fleet):
    p = price_save(actor=fleet.operator, reason="new list", price=_row(fleet.pool_a, "on_demand", "4.00"))
    p.usd_per_accelerator_hour = Decimal("3.50")
    price_save(actor=fleet.operator, reason="vendor cut the list price", price=p)
    pk = p.pk
    price_delete(actor=fleet.operator, reason="withdrawn", price=p)
    rows = list(PriceChange.objects.filter(price_id=pk).order_by("pk"))
    assert [r.op for r in rows] == ["insert", "update", "delete"]
    assert {r.actor_id for r in rows} == {fleet.operator.pk}
    assert [r.reason for r in rows] == ["new list", "vendor cut the list price", "withdrawn"]
    assert rows[1].before["usd_per_accelerator_hour"] == "4.0000"
    assert rows[1].after["usd_per_accelerator_hour"] == "3.5000"
    assert rows[2].after is None and not Price.objects.filter(pk=pk).exists()


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("usd_per_accelerator_hour", {"usd_per_accelerator_hour": Decimal("-0.01")}),
        ("term", {"term": "2_year"}),
        ("reason", {}),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(fleet, field, change):
    row = _row(fleet.pool_a, "on_demand", "4.00")
    for k, v in change.items():
        setattr(row, k, v)
    with pytest.raises(ValidationError) as e:
        price_save(actor=fleet.operator, reason="" if field == "reason" else "x", price=row)
    assert field in e.value.message_dict
    assert not Price.objects.exists() and not PriceChange.objects.exists()


def test_api_lists_rows_for_everyone_signed_in_and_names_a_bad_term(fleet):
    price_save(actor=fleet.operator, reason="list", price=_row(fleet.pool_a, "on_demand", "4.00"))
    price_save(actor=fleet.operator, reason="list", price=_row(fleet.pool_a, "1_year", "2.48"))
    viewer = member("v", fleet.acme, "viewer")
    body = api_client(viewer).get("/api/v1/prices").json()
    assert [(r["term"], r["usd_per_accelerator_hour"]) for r in body["results"]] == [
        ("1_year", 2.48),
        ("on_demand", 4.0),
    ]
    assert set(body["results"][0]) == {
        "accelerator",
        "region",
        "term",
        "usd_per_accelerator_hour",
        "effective_from",
        "source",
    }
    assert len(api_client(viewer).get("/api/v1/prices?term=1_year").json()["results"]) == 1
    bad = api_client(viewer).get("/api/v1/prices?term=forever")
    assert bad.status_code == 400 and "term" in bad.json()["error"]["fields"]
    assert api_client(platform_user("gw", "gateway")).get("/api/v1/prices").status_code == 403


def test_admin_edit_needs_a_reason_and_is_audited(fleet):
    fleet.operator.is_staff = True
    fleet.operator.save()
    from django.contrib.auth.models import Permission

    fleet.operator.user_permissions.add(*Permission.objects.filter(content_type__app_label="entitlements"))
    c = web_client(fleet.operator)
    form = {
        "accelerator": fleet.pool_a.accelerator_id,
        "region": fleet.pool_a.region_id,
        "term": "6_month",
        "usd_per_accelerator_hour": "3.00",
        "effective_from": "2026-01-01",
        "source": "contract 42",
    }
    c.post("/admin/entitlements/price/add/", {**form, "reason": ""})
    assert not Price.objects.exists()  # no reason: the form refuses
    negative = c.post("/admin/entitlements/price/add/", {**form, "usd_per_accelerator_hour": "-1", "reason": "x"})
    assert "usd_per_accelerator_hour" in negative.context["adminform"].form.errors
    c.post("/admin/entitlements/price/add/", {**form, "reason": "signed the 6-month contract"})
    change = PriceChange.objects.get()
    assert (change.actor_id, change.reason, change.op) == (fleet.operator.pk, "signed the 6-month contract", "insert")


def test_pool_rate_derives_from_its_terms_row_plus_the_overheads(fleet):
    pool = fleet.pool_a
    Accelerator.objects.filter(pk=pool.accelerator_id).update(
        purchase_price_usd=30_000, host_cost_per_hour=0.4, network_cost_per_hour=0.1, software_cost_per_hour=0.2
    )
    price_save(actor=None, reason="list", price=_row(pool, "on_demand", "6.00"))
    price_save(actor=None, reason="list", price=_row(pool, "1_year", "3.60"))
    pool = Pool.objects.get(pk=pool.pk)
    accelerators = pool.replicas * pool.accelerators_per_replica
    deliverable = float(pool.breakdown().deliverable)
    on_demand = pool_cu_hour_rate(pool)
    # a cloud rate includes power: chip + host, network, storage and software per accelerator-hour, no energy
    assert on_demand.usd_per_cu_hour == pytest.approx(accelerators * (6.00 + 0.7) / deliverable)
    assert on_demand.term == "on_demand" and "price list" in on_demand.derivation
    Pool.objects.filter(pk=pool.pk).update(term="1_year")
    one_year = pool_cu_hour_rate(Pool.objects.get(pk=pool.pk))
    assert one_year.usd_per_cu_hour == pytest.approx(accelerators * (3.60 + 0.7) / deliverable)
    assert pool_cu_hour_rate(pool, term="1_year").usd_per_cu_hour == one_year.usd_per_cu_hour
    # a term the list lacks keeps the catalogue's basis (owned here: the purchase price)
    assert pool_cu_hour_rate(pool, term="3_year").pricing == "purchased"


def test_the_latest_row_in_force_wins(fleet):
    pool = fleet.pool_a
    price_save(actor=None, reason="old", price=_row(pool, "on_demand", "6.00", effective_from=date(2025, 1, 1)))
    price_save(actor=None, reason="new", price=_row(pool, "on_demand", "5.00", effective_from=date(2026, 1, 1)))
    price_save(actor=None, reason="future", price=_row(pool, "on_demand", "1.00", effective_from=date(2999, 1, 1)))
    from entitlements.prices import price_for

    assert price_for(pool.accelerator_id, pool.region_id, "on_demand").usd_per_accelerator_hour == Decimal("5.0000")


def test_no_commitment_may_cost_more_than_on_demand(fleet):
    price_save(actor=None, reason="list", price=_row(fleet.pool_a, "on_demand", "4.00"))
    with pytest.raises(ValidationError) as e:
        price_save(actor=None, reason="list", price=_row(fleet.pool_a, "1_year", "4.01"))
    assert "usd_per_accelerator_hour" in e.value.message_dict
    price_save(actor=None, reason="list", price=_row(fleet.pool_a, "1_year", "2.50"))
    lower = Price.objects.get(term="on_demand")
    lower.usd_per_accelerator_hour = Decimal("2.00")
    with pytest.raises(ValidationError) as e:
        price_save(actor=None, reason="cut", price=lower)
    assert "usd_per_accelerator_hour" in e.value.message_dict
    assert Price.objects.get(term="on_demand").usd_per_accelerator_hour == Decimal("4.0000")


def test_demo_price_list_never_quotes_a_commitment_above_on_demand():
    import csv

    from django.conf import settings

    with (settings.DATA_DIR / "prices.csv").open() as f:
        rows = list(csv.DictReader(f))
    on_demand = {
        (r["accelerator"], r["region"]): float(r["usd_per_accelerator_hour"]) for r in rows if r["term"] == "on_demand"
    }
    assert len({r["term"] for r in rows}) == 5
    for r in rows:
        assert 0 < float(r["usd_per_accelerator_hour"]) <= on_demand[(r["accelerator"], r["region"])]
        assert r["source"] and r["read_on"]
        assert r["term"] == "on_demand" or r["source"].startswith("derived:")


def test_usd_per_weighted_token_is_the_terms_cu_hour_rate_over_r_times_3600(fleet):
    from entitlements.services import entitlement_grant
    from entitlements.usd_per_token import usd_per_weighted_token
    from tests.factories import grant_kwargs

    pool = fleet.pool_a
    price_save(actor=None, reason="list", price=_row(pool, "on_demand", "6.00"))
    price_save(actor=None, reason="list", price=_row(pool, "1_year", "3.60"))
    ent = entitlement_grant(actor=None, reason="t", term="1_year", **grant_kwargs(pool, fleet.acme, 10))
    per_wt = usd_per_weighted_token(ent)
    r = pool.model.r_wt_per_s
    assert per_wt == pytest.approx(pool_cu_hour_rate(pool, "1_year").usd_per_cu_hour / (r * 3600))
    # on demand costs more per token than the 1-year term: 6.00 / 3.60 (no overheads in this fleet)
    ent.term = "on_demand"
    assert usd_per_weighted_token(ent) == pytest.approx(per_wt * 6.00 / 3.60)


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("usd_per_accelerator_hour", {"usd_per_accelerator_hour": Decimal("-0.01")}),
        ("usd_per_accelerator_hour", {"usd_per_accelerator_hour": Decimal("1e308")}),
        ("term", {"term": "forever"}),
    ],
)
def test_a_bad_edit_of_an_accepted_row_is_refused_naming_the_field_and_the_row_stands(fleet, field, change):
    """Issue 51's bad input: a 400 (here the service's error) naming the field, and nothing already accepted is
    lost: the row keeps its figure, no audit row is written for the refused edit."""
    p = price_save(actor=fleet.operator, reason="list", price=_row(fleet.pool_a, "on_demand", "4.00"))
    edited = Price.objects.get(pk=p.pk)
    for k, v in change.items():
        setattr(edited, k, v)
    with pytest.raises(ValidationError) as e:
        price_save(actor=fleet.operator, reason="edit", price=edited)
    assert field in e.value.message_dict
    kept = Price.objects.get(pk=p.pk)
    assert (kept.term, kept.usd_per_accelerator_hour) == ("on_demand", Decimal("4.0000"))
    assert PriceChange.objects.count() == 1
