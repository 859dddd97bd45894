"""Issue 36.3: lending limits and fair-share weights, from the API through the snapshot to the plans.

The enforcement itself (both backends) is in test_backend_contract.py; here: the fields' rules (a 400
naming the field, the database's constraints), and that what is stored is what the serving path
enforces (the snapshot's scopes and pools, the plan's lend bucket and weight, the exported block).
Fleet: pool-a and pool-b both serve llama-test in us-test, 280 CU deliverable each.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from admission import keys, params, plans, snapshot_export
from entitlements.models import Entitlement
from entitlements.services import entitlement_amend, entitlement_grant
from tests import api_people
from tests.clients import api_client
from tests.factories import grant_kwargs

pytestmark = pytest.mark.django_db
URL = "/api/v1/entitlements"
people = api_people.people  # the API tests' people (a fixture)


@pytest.fixture
def operator_api(people):
    return api_client(people["operator"])


def _grant(fleet, cu, cls="reserved", tenant=None, **kw):
    args = grant_kwargs(fleet.pool_a, tenant or fleet.acme, cu, traffic_class=cls)
    return entitlement_grant(actor=fleet.operator, reason="t", **{**args, **kw})


def _body(**over):
    start = timezone.now() - timedelta(minutes=5)
    body = {
        "tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved", "cu": "100",
        "starts_at": start.isoformat(), "ends_at": (start + timedelta(days=30)).isoformat(),
        "max_prompt_tokens": 8000, "max_output_tokens": 2000, "prompt_p50": 1000, "prompt_p95": 4000,
        "output_p50": 200, "output_p95": 800, "max_concurrency": 64, "ttft_p99_ms": 2000, "tpot_p99_ms": 200,
        "reason": "launch",
    }  # fmt: skip
    body.update(over)
    return body


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"lending_limit_cu": "-1"}, "lending_limit_cu", "greater than or equal to 0"),
        ({"lending_limit_cu": "100.001"}, "lending_limit_cu", "at most the entitlement's"),
        ({"traffic_class": "best_effort", "cu": "1", "lending_limit_cu": "0.5"}, "lending_limit_cu", "only reserved"),
        ({"weight": 0}, "weight", "greater than 0"),
        ({"traffic_class": "best_effort", "cu": "1", "weight": -2}, "weight", "greater than 0"),
        ({"traffic_class": "best_effort", "cu": "1", "weight": 1000.5}, "weight", "1000"),
        ({"traffic_class": "best_effort", "cu": "1", "weight": True}, "weight", "valid number"),
        ({"weight": 2}, "weight", "only best_effort"),
        ({"traffic_class": "shared", "weight": 1}, "weight", "only best_effort"),
        # Overage throttle never borrows: a weight or borrowing limit beside it is a term that does nothing.
        ({"traffic_class": "best_effort", "cu": "1", "weight": 2}, "weight", "overage throttle never borrows"),
        (
            {"traffic_class": "best_effort", "cu": "1", "overage": "throttle", "borrowing_limit_cu": "5"},
            "borrowing_limit_cu",
            "overage throttle never borrows",
        ),
    ],
)
def test_grant_with_a_bad_lending_limit_or_weight_is_a_400_naming_the_field(operator_api, over, field, words):
    response = operator_api.post(URL, _body(**over), format="json")
    assert response.status_code == 400, response.json()
    err = response.json()["error"]["fields"]
    assert list(err) == [field]
    assert words in str(err[field])
    assert Entitlement.objects.count() == 0


def test_grant_and_amend_lending_limit_and_weight_over_the_api(operator_api):
    client = operator_api
    lender = client.post(URL, _body(cu="100", lending_limit_cu="40"), format="json")
    assert lender.status_code == 201, lender.json()
    assert (lender.json()["lending_limit_cu"], lender.json()["weight"]) == (40.0, None)
    be = client.post(URL, _body(traffic_class="best_effort", cu="1", overage="borrow", weight=3), format="json").json()
    assert (be["weight"], be["lending_limit_cu"]) == (3.0, None)
    url = f"{URL}/{lender.json()['id']}"
    assert client.patch(url, {"lending_limit_cu": "100", "reason": "lend all"}, format="json").status_code == 200
    # Lowering the CU below the lending limit names the limit.
    bad = client.patch(url, {"cu": "50", "reason": "shrink"}, format="json")
    assert (bad.status_code, list(bad.json()["error"]["fields"])) == (400, ["lending_limit_cu"])
    cleared = client.patch(url, {"lending_limit_cu": None, "reason": "lend all idle"}, format="json").json()
    assert cleared["lending_limit_cu"] is None and cleared["version"] == 3
    wurl = f"{URL}/{be['id']}"
    assert client.patch(wurl, {"weight": 0, "reason": "x"}, format="json").json()["error"]["fields"] == {
        "weight": ["must be greater than 0"]
    }
    assert client.patch(wurl, {"weight": 7.5, "reason": "more"}, format="json").json()["weight"] == 7.5


def test_amending_a_borrower_to_overage_throttle_names_what_it_would_keep(operator_api):
    body = _body(traffic_class="best_effort", cu="1", overage="borrow", borrowing_limit_cu="5", weight=3)
    be = operator_api.post(URL, body, format="json").json()
    url = f"{URL}/{be['id']}"
    bad = operator_api.patch(url, {"overage": "throttle", "reason": "stop borrowing"}, format="json")
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"borrowing_limit_cu", "weight"}
    change = {"overage": "throttle", "borrowing_limit_cu": "0", "weight": None, "reason": "stop borrowing"}
    done = operator_api.patch(url, change, format="json").json()
    assert (done["overage"], done["borrowing_limit_cu"], done["weight"]) == ("throttle", 0.0, None)


@pytest.mark.parametrize(
    "change",
    [{"lending_limit_cu": Decimal(11)}, {"lending_limit_cu": Decimal(-1)}, {"weight": 2.0}],
    ids=["over-cu", "negative", "weight-on-reserved"],
)
def test_the_database_refuses_what_the_services_refuse(fleet, change):
    e = _grant(fleet, "10")
    with pytest.raises(IntegrityError), transaction.atomic():
        Entitlement.objects.filter(pk=e.pk).update(**change)


@pytest.mark.parametrize(
    ("kw", "field", "words"),
    [
        ({"weight": 1000.5}, "weight", "at most 1000"),
        ({"weight": 0.0}, "weight", "greater than 0"),
    ],
)
def test_the_service_refuses_a_bad_weight_naming_it_before_the_database_does(fleet, kw, field, words):
    # A caller in code (a launch approval, the demo) goes through entitlement_grant, not the API's serializer:
    # the model's own check names the field (a 400), where the database's would be an IntegrityError (a 500).
    with pytest.raises(ValidationError) as e:
        _grant(fleet, "1", "best_effort", overage="borrow", borrowing_limit_cu="5", **kw)
    assert words in e.value.message_dict[field][0]
    assert not Entitlement.objects.filter(traffic_class="best_effort").exists()


@pytest.mark.parametrize("change", [{"lending_limit_cu": Decimal(0)}, {"weight": 0.0}, {"weight": 1000.001}])
def test_the_database_refuses_bad_values_on_best_effort(fleet, change):
    e = _grant(fleet, "1", "best_effort", overage="borrow", borrowing_limit_cu="5")
    with pytest.raises(IntegrityError), transaction.atomic():
        Entitlement.objects.filter(pk=e.pk).update(**change)


def test_the_snapshot_and_the_plans_carry_what_is_stored(fleet):
    r = float(fleet.pool_a.model.r_wt_per_s)
    _grant(fleet, "100", lending_limit_cu="30")  # keeps back 70 CU
    _grant(fleet, "50", "shared", tenant=fleet.globex)  # lends all its idle room
    light = _grant(fleet, "1", "best_effort", overage="borrow", borrowing_limit_cu="20")
    heavy = _grant(fleet, "1", "best_effort", tenant=fleet.globex, overage="borrow", borrowing_limit_cu="20", weight=3)
    params.invalidate()
    snap = params.current()
    pool = snap.pools[fleet.pool_a.pk]
    assert pool.lend_rate == pytest.approx(pool.rate - 70 * r)
    acme = snap.lookup("acme", "", "llama-test", "us-test", "reserved")
    assert acme is not None and acme.lending_limit_cu == pytest.approx(30.0)
    assert snap.lookup("globex", "", "llama-test", "us-test", "shared").lending_limit_cu is None
    sp_light = snap.lookup("acme", "", "llama-test", "us-test", "best_effort")
    sp_heavy = snap.lookup("globex", "", "llama-test", "us-test", "best_effort")
    assert (sp_light.weight, sp_heavy.weight) == (1.0, 3.0)
    t = keys.tag("adm:", fleet.pool_a.pk)
    plan = plans.plan_for(snap, sp_heavy, pool, "adm:", ("globex", "llama-test", "us-test", "best_effort"))
    share = plan.scope.share
    assert share is not None and share.weight == 3.0 and share.fair == keys.fair(t)
    assert share.lend is not None and share.lend.key == keys.lend(t)
    assert (share.lend.rate, share.lend.depth) == pytest.approx((pool.lend_rate, pool.lend_rate * 60))
    lender_plan = plans.plan_for(snap, acme, pool, "adm:", ("acme", "llama-test", "us-test", "reserved"))
    assert lender_plan.scope.share is None  # lenders never pass through the borrowers' gate
    # The library mode's block carries the same.
    block = snapshot_export.block(timezone.now())
    by_scope = {tuple(s["scope"]): s for s in block["scopes"]}
    assert by_scope[("globex", "", "llama-test", "us-test", "best_effort")]["weight"] == 3.0
    assert by_scope[("acme", "", "llama-test", "us-test", "reserved")]["lending_limit_cu"] == 30.0
    assert {p["id"]: p["lend_rate"] for p in block["pools"]}[fleet.pool_a.pk] == pytest.approx(pool.lend_rate)
    # ...and so do the snapshot's entitlements (docs/contract.md §5: both are in the snapshot).
    from entitlements.api.snapshot import build_snapshot

    ents = {(e["tenant"], e["traffic_class"]): e for e in build_snapshot()["entitlements"]}
    assert (ents[("acme", "reserved")]["lending_limit_cu"], ents[("acme", "reserved")]["weight"]) == (30.0, None)
    assert ents[("globex", "shared")]["lending_limit_cu"] is None
    assert (ents[("acme", "best_effort")]["weight"], ents[("globex", "best_effort")]["weight"]) == (1.0, 3.0)
    # No lending limit anywhere: no lend bucket (the pool bucket alone holds borrowers).
    entitlement_amend(actor=fleet.operator, reason="lend all", entitlement=Entitlement.objects.get(cu=100),
                      lending_limit_cu=None)  # fmt: skip
    params.invalidate()
    assert params.current().pools[fleet.pool_a.pk].lend_rate is None
    assert light.weight is None and heavy.weight == 3.0


def test_the_pool_page_shows_lenders_limits_and_borrowers_weights_and_tokens(fleet, store, sink, client):
    """The operator's pool page: per lender its lending limit and lent tokens, per borrower its weight
    and borrowed tokens in the window, read from the store (both backends)."""
    from admission import services
    from tests.admission.world import body, build_world

    w = build_world(fleet)  # pool 280 wt/s; acme reserved 200 wt/s; globex best_effort 50 + 50 borrowing
    entitlement_amend(actor=fleet.operator, reason="t", entitlement=w.lender, lending_limit_cu="0.1")
    entitlement_amend(actor=fleet.operator, reason="t", entitlement=w.borrower, weight=2.5)
    params.invalidate()
    sources = []
    for i in range(5):  # 1,000 wt each: three from its own 3,000-wt bucket, then borrowed
        d = services.reserve(services.parse_reserve(body("globex", "best_effort", f"g{i}")))
        sources.append(d.body.get("source") or d.body["reason"])
    assert sources == ["entitlement"] * 3 + ["borrowed"] * 2
    got = lending_of(w.pool.pk)
    assert [(x.scope, x.lending_limit_cu) for x in got.lenders] == [("acme", pytest.approx(0.1))]
    (b,) = got.borrowers
    assert (b.scope, b.weight, b.active) == ("globex", 2.5, True)
    assert 1990.0 < b.borrowed_wt <= 2000.0  # two borrowed admissions, decayed over the test's seconds
    lend_rate = params.current().pools[w.pool.pk].lend_rate  # 280 − (200 − 0.1 CU) wt/s: the unsold 80 + 0.1 CU
    assert got.lend_room_wt is not None and got.lend_room_wt <= lend_rate * 60 - 2000 + lend_rate * 10  # 2 borrowed
    client.force_login(fleet.operator)
    page = client.get(f"/planning/pools/{w.pool.slug}/").content.decode()
    assert 'id="lending"' in page and "<caption>Lenders</caption>" in page
    section = page[page.index('id="lending"') :]
    assert "0.1 CU" in section and "globex" in section and "<td>2.50</td>" in section, section
    assert "100 %" in section or "100.0 %" in section  # globex holds all borrowed tokens, and all active weight
    from tests.portal.test_page_numbers import long_numbers, machine_text

    html = section[: section.index("</section>")]
    assert not machine_text(html) and not long_numbers(html)  # the pages' rules (issue 22, 28.8)
    # A tenant member does not reach the page at all.
    member = api_people.member("ann", fleet.acme, "viewer")
    client.force_login(member)
    assert client.get(f"/planning/pools/{w.pool.slug}/").status_code in (403, 404)


def lending_of(pool_id):
    from admission.lending import pool_lending

    return pool_lending(pool_id)
