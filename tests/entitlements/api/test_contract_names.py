"""CONTRACT.md §5 names spillover `spillover: {target, budget}` and the lending limit `lending_limit`; the
API stores them as spillover_target / spillover_budget_cu and lending_limit_cu (docs/contract.md). Both
spellings are read and written; the contract's shape sets the same columns, is cleared by null, and a
request that gives both spellings with different values is a 400 naming the contract's field."""

from __future__ import annotations

import pytest

from entitlements.models import Entitlement
from tests import api_people
from tests.admission import test_spillover_api as spill_api
from tests.admission.test_spillover_api import URL, _body

# The spillover API tests' fleet of targets (fixtures, by the names the tests ask for)
people = api_people.people
operator_api = spill_api.operator_api
targets = spill_api.targets

pytestmark = pytest.mark.django_db


def test_the_contract_shape_sets_the_stored_fields_and_reads_back(operator_api, targets):
    b = str(targets["acme_b"].uuid)
    made = operator_api.post(URL, _body(spillover={"target": b, "budget": 2.5}, lending_limit="4"), format="json")
    assert made.status_code == 201, made.json()
    got = made.json()
    assert (got["spillover"], got["spillover_target"], got["spillover_budget_cu"]) == (
        {"target": b, "budget": 2.5},
        b,
        2.5,
    )
    assert (got["lending_limit"], got["lending_limit_cu"]) == (4.0, 4.0)
    ent = Entitlement.objects.get(uuid=got["id"])
    assert (ent.spillover_target_id, float(ent.spillover_budget_cu), float(ent.lending_limit_cu)) == (
        targets["acme_b"].pk, 2.5, 4.0
    )  # fmt: skip
    cleared = operator_api.patch(f"{URL}/{got['id']}", {"spillover": None, "lending_limit": None, "reason": "stop"},
                                 format="json")  # fmt: skip
    assert cleared.status_code == 200, cleared.json()
    c = cleared.json()
    assert (c["spillover"], c["spillover_target"], c["spillover_budget_cu"], c["lending_limit_cu"]) == (None,) * 4


def test_both_spellings_that_disagree_are_a_400_naming_the_contract_field(operator_api, targets):
    b = str(targets["acme_b"].uuid)
    before = Entitlement.objects.count()
    two = operator_api.post(URL, _body(spillover={"target": b, "budget": 2.5}, spillover_budget_cu=3), format="json")
    assert (two.status_code, list(two.json()["error"]["fields"])) == (400, ["spillover"])
    lend = operator_api.post(URL, _body(lending_limit="4", lending_limit_cu="5"), format="json")
    assert (lend.status_code, list(lend.json()["error"]["fields"])) == (400, ["lending_limit"])
    same = operator_api.post(URL, _body(spillover={"target": b, "budget": 2.5}, spillover_budget_cu=2.5), format="json")
    assert same.status_code == 201, same.json()
    assert Entitlement.objects.count() == before + 1


@pytest.mark.parametrize(
    ("spill", "field"),
    [
        ({"budget": 1}, "target"),
        ({"target": "00000000-0000-0000-0000-000000000000", "budget": 1}, "target"),
        ({"target": None, "budget": 1}, "target"),
        ("b", "budget"),
        ("0", "budget"),
        ("-1", "budget"),
        ("1e308", "budget"),
    ],
)
def test_a_bad_contract_shape_names_its_inner_field(operator_api, targets, spill, field):
    b = str(targets["acme_b"].uuid)
    body = spill if isinstance(spill, dict) else {"target": b, "budget": None if spill == "b" else float(spill)}
    before = Entitlement.objects.count()
    r = operator_api.post(URL, _body(spillover=body), format="json")
    assert r.status_code == 400, r.json()
    assert list(r.json()["error"]["fields"]) == ["spillover"] and list(r.json()["error"]["fields"]["spillover"]) == [
        field
    ]
    assert Entitlement.objects.count() == before


def test_the_model_rules_still_apply_through_the_contract_shape(operator_api, targets):
    other = str(targets["globex_b"].uuid)
    r = operator_api.post(URL, _body(spillover={"target": other, "budget": 1}), format="json")
    assert (r.status_code, list(r.json()["error"]["fields"])) == (400, ["spillover_target"])


def test_the_snapshot_carries_the_contract_names(operator_api, targets, people):
    b = str(targets["acme_b"].uuid)
    made = operator_api.post(
        URL, _body(spillover={"target": b, "budget": 2.5}, lending_limit="4"), format="json"
    ).json()
    from tests.clients import api_client

    snap = api_client(people["gateway"]).get("/api/v1/entitlements/snapshot").json()
    row = next(e for e in snap["entitlements"] if e["uuid"] == made["id"])
    assert (row["spillover"]["target"], row["spillover"]["budget"], row["spillover"]["budget_cu"]) == (b, 2.5, 2.5)
    assert (row["lending_limit"], row["lending_limit_cu"]) == (4.0, 4.0)
