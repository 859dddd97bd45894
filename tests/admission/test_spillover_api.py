"""Spillover (issue 36.1) from the API through the snapshot to the HTTP serving path.

The enforcement on both backends is test_spillover_contract.py; here: the fields' rules (a 400 naming
the field), that what is stored is what the serving path enforces (the snapshot's scopes, the plan's
spill under pool-b's hash tag, the exported block, GET /api/v1/entitlements/snapshot), and a spilled
reserve + complete over HTTP. Fleet: pool-a and pool-b both serve llama-test in us-test.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from admission import keys, params, plans, services, snapshot_export
from entitlements.models import Entitlement
from entitlements.services import entitlement_grant
from tests import api_people
from tests.clients import api_client
from tests.factories import grant_kwargs

pytestmark = pytest.mark.django_db
URL = "/api/v1/entitlements"
people = api_people.people


@pytest.fixture
def operator_api(people):
    return api_client(people["operator"])


def _grant(fleet, cu, cls="reserved", tenant=None, pool=None, **kw):
    args = grant_kwargs(pool or fleet.pool_a, tenant or fleet.acme, cu, traffic_class=cls)
    return entitlement_grant(actor=fleet.operator, reason="t", **{**args, **kw})


def _body(**over):
    start = timezone.now() - timedelta(minutes=5)
    body = {
        "tenant": "acme", "model": "llama-test", "region": "us-test", "pool": "pool-a", "traffic_class": "reserved",
        "cu": "10", "starts_at": start.isoformat(), "ends_at": (start + timedelta(days=30)).isoformat(),
        "max_prompt_tokens": 8000, "max_output_tokens": 2000, "prompt_p50": 1000, "prompt_p95": 4000,
        "output_p50": 200, "output_p95": 800, "max_concurrency": 64, "ttft_p99_ms": 2000, "tpot_p99_ms": 200,
        "reason": "launch",
    }  # fmt: skip
    body.update(over)
    return body


@pytest.fixture
def targets(fleet):
    """acme's best_effort scope in pool-b (a valid target), globex's, and acme's own reserved in pool-a."""
    return {
        "acme_b": _grant(fleet, "1", "best_effort", pool=fleet.pool_b),
        "globex_b": _grant(fleet, "1", "best_effort", tenant=fleet.globex, pool=fleet.pool_b),
        "acme_a_shared": _grant(fleet, "5", "shared"),
        "acme_other_model": _grant(fleet, "1", "best_effort", pool=_other_model_pool(fleet)),
    }


def _other_model_pool(fleet):
    """A pool of another model (mistral-test) in the same region."""
    from tests.factories import OperatingPointFactory, ServedModelFactory, make_pool

    op = OperatingPointFactory(model=ServedModelFactory(slug="mistral-test", name="Mistral test"))
    return make_pool("pool-m", op=op, region=fleet.pool_a.region)


def _raw_post(client, body):
    return client.generic("POST", URL, json.dumps(body, allow_nan=True), content_type="application/json")


def test_a_bare_nan_budget_is_refused_before_it_is_read(operator_api, targets):
    response = _raw_post(operator_api, _body(spillover_target=str(targets["acme_b"].uuid),
                                             spillover_budget_cu=float("nan")))  # fmt: skip
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "parse_error" and "NaN" in response.json()["error"]["message"]


@pytest.mark.parametrize(
    ("over", "field", "words"),
    [
        ({"spillover_target": "globex_b", "spillover_budget_cu": 2}, "spillover_target", "another tenant"),
        ({"spillover_target": "acme_a_shared", "spillover_budget_cu": 2}, "spillover_target", "same pool"),
        (
            {"spillover_target": "acme_other_model", "spillover_budget_cu": 2},
            "spillover_target",
            "serves mistral-test, not llama-test",
        ),
        ({"spillover_target": "acme_b"}, "spillover_budget_cu", "needs a budget"),
        ({"spillover_budget_cu": 2}, "spillover_budget_cu", "needs a spillover_target"),
        ({"spillover_target": "acme_b", "spillover_budget_cu": -1}, "spillover_budget_cu", "greater than 0"),
        ({"spillover_target": "acme_b", "spillover_budget_cu": 0}, "spillover_budget_cu", "greater than 0"),
        ({"spillover_target": "acme_b", "spillover_budget_cu": 1e308}, "spillover_budget_cu", "less than or equal"),
        # A bare NaN is refused by the JSON parser before any field (test below); as a string it reaches the field.
        ({"spillover_target": "acme_b", "spillover_budget_cu": "NaN"}, "spillover_budget_cu", "valid number"),
        ({"spillover_target": "acme_b", "spillover_budget_cu": "-Infinity"}, "spillover_budget_cu", "valid number"),
        ({"spillover_target": "acme_b", "spillover_budget_cu": True}, "spillover_budget_cu", "valid number"),
        (
            {"spillover_target": "00000000-0000-0000-0000-000000000000", "spillover_budget_cu": 2},
            "spillover_target",
            "does not exist",
        ),
        ({"overflow": "maybe"}, "overflow", "not a valid choice"),
        ({"overflow": "allow\x00"}, "overflow", "must not contain NUL characters"),
        # a subnormal budget is below the field's 0.001 CU step: it reads as 0, refused as such
        ({"spillover_target": "acme_b", "spillover_budget_cu": 1e-320}, "spillover_budget_cu", "greater than 0"),
    ],
)
def test_a_bad_spillover_is_a_400_naming_the_field(operator_api, targets, over, field, words):
    given = {k: str(targets[v].uuid) if k == "spillover_target" and v in targets else v for k, v in over.items()}
    before = Entitlement.objects.count()
    response = _raw_post(operator_api, _body(**given))
    assert response.status_code == 400, response.content
    err = response.json()["error"]["fields"]
    assert list(err) == [field]
    assert words in str(err[field])
    assert Entitlement.objects.count() == before


def test_another_model_and_itself_are_refused_on_amend(operator_api, fleet, targets):
    own = operator_api.post(URL, _body(), format="json").json()
    url = f"{URL}/{own['id']}"
    itself = operator_api.patch(url, {"spillover_target": own["id"], "spillover_budget_cu": 1, "reason": "x"},
                                format="json")  # fmt: skip
    assert (itself.status_code, itself.json()["error"]["fields"]) == (
        400, {"spillover_target": ["an entitlement cannot spill over to itself"]}
    )  # fmt: skip
    ok = operator_api.patch(url, {"spillover_target": str(targets["acme_b"].uuid), "spillover_budget_cu": 2.5,
                                  "overflow": "deny", "reason": "spill"}, format="json")  # fmt: skip
    assert ok.status_code == 200, ok.json()
    got = ok.json()
    assert (got["spillover_target"], got["spillover_budget_cu"], got["overflow"]) == (
        str(targets["acme_b"].uuid), 2.5, "deny"
    )  # fmt: skip
    cleared = operator_api.patch(url, {"spillover_target": None, "spillover_budget_cu": None, "reason": "stop"},
                                 format="json").json()  # fmt: skip
    assert (cleared["spillover_target"], cleared["spillover_budget_cu"]) == (None, None)


def test_the_snapshot_the_plan_and_both_exports_carry_the_spillover(fleet, targets, client, people):
    r = float(fleet.pool_a.model.r_wt_per_s)
    own = _grant(fleet, "10", spillover_target=targets["acme_b"], spillover_budget_cu="2.5", overflow="deny")
    params.invalidate()
    snap = params.current()
    sp = snap.lookup("acme", "", "llama-test", "us-test", "reserved")
    assert sp is not None and sp.spillover is not None
    assert (sp.spillover.target_pool_id, sp.spillover.allow, sp.spillover.target) == (
        fleet.pool_b.pk, False, str(targets["acme_b"].uuid)
    )  # fmt: skip
    assert sp.spillover.rate == pytest.approx(2.5 * r)
    # The plan: the spill budget, pool-b's bucket and the in-flight zset all under pool-b's hash tag.
    plan = plans.plan_for(snap, sp, snap.pools[fleet.pool_a.pk], "adm:", ("acme", "llama-test", "us-test", "reserved"))
    spill, tb = plan.scope.spill, keys.tag("adm:", fleet.pool_b.pk)
    assert spill is not None and spill.tag == tb and spill.slug == fleet.pool_b.slug and not spill.allow
    assert (spill.bucket.key, spill.pool.key, spill.inflight_key) == (
        keys.spill(tb, sp.key), keys.pool(tb), keys.spill_inflight(tb, sp.key)
    )  # fmt: skip
    assert (spill.bucket.rate, spill.bucket.depth) == pytest.approx((2.5 * r, 2.5 * r * 60))
    pb = snap.pools[fleet.pool_b.pk]
    assert (spill.pool.rate, spill.margin) == (pb.rate, pb.margin)
    # The library mode's block, and what the library makes of it: the same spillover.
    from admission.library import view_from

    block = snapshot_export.block(timezone.now())
    row = {tuple(s["scope"]): s for s in block["scopes"]}[("acme", "", "llama-test", "us-test", "reserved")]
    assert row["spillover"] == {"target_pool_id": fleet.pool_b.pk, "rate": sp.spillover.rate, "allow": False,
                                "target": str(targets["acme_b"].uuid)}  # fmt: skip
    assert view_from(json.loads(json.dumps(block)), 1, "e").snap.scopes[("acme", "", "llama-test", "us-test",
                                                                         "reserved")] == sp  # fmt: skip
    # GET /api/v1/entitlements/snapshot names target, its pool and the budget.
    gw = api_client(people["gateway"])
    ents = {e["uuid"]: e for e in gw.get("/api/v1/entitlements/snapshot").json()["entitlements"]}
    assert ents[str(own.uuid)]["spillover"] == {"target": str(targets["acme_b"].uuid), "target_pool": "pool-b",
                                                "budget_cu": 2.5, "budget": 2.5}  # fmt: skip
    assert ents[str(own.uuid)]["overflow"] == "deny"
    assert ents[str(targets["acme_b"].uuid)]["spillover"] is None
    # A revoked target serves nothing: the scope has no spillover any more.
    Entitlement.objects.filter(pk=targets["acme_b"].pk).update(revoked_at=timezone.now())
    params.invalidate()
    assert params.current().lookup("acme", "", "llama-test", "us-test", "reserved").spillover is None


def test_a_spilled_reserve_and_its_complete_over_http(fleet, targets, store, sink, people):
    # acme reserved, 0.001 CU (a bucket far below one request), spilling up to 5 CU into pool-b.
    _grant(fleet, "0.001", spillover_target=targets["acme_b"], spillover_budget_cu="5")
    params.invalidate()
    gw = api_client(people["gateway"])
    req = {"request_id": "h-1", "tenant": "acme", "model": "llama-test", "region": "us-test",
           "traffic_class": "reserved", "prompt_tokens": 100, "max_output_tokens": 10}  # fmt: skip
    admit = gw.post("/api/v1/admission/reserve", req, format="json")
    assert admit.status_code == 200, admit.json()
    body = admit.json()
    assert (body["source"], body["served_from"], body["reserved_wt"]) == ("spillover", "pool-b", 140.0)
    assert admit["x-headroom-served-from"] == "pool-b"  # said in a header too (issue 48)
    assert gw.post("/api/v1/admission/reserve", req, format="json").json() == body  # the same answer
    denied = gw.post("/api/v1/admission/reserve", {**req, "request_id": "h-2", "overflow": "deny"}, format="json")
    assert (denied.status_code, denied.json()["reason"]) == (429, "QUOTA_EXCEEDED")
    assert "x-headroom-served-from" not in denied
    bad = gw.post("/api/v1/admission/reserve", {**req, "request_id": "h-3", "overflow": "yes"}, format="json")
    assert bad.status_code == 400 and "overflow" in json.dumps(bad.json())
    done = gw.post("/api/v1/admission/complete", {"reservation_id": body["reservation_id"], "prompt_tokens": 100,
                                                  "output_tokens": 5, "status": "ok"}, format="json")  # fmt: skip
    assert (done.status_code, done.json()["refunded_wt"]) == (200, 20.0)
    sp = params.current().lookup("acme", "", "llama-test", "us-test", "reserved")
    spill = services.plans.plan_for(params.current(), sp, params.current().pools[fleet.pool_a.pk], store.prefix,
                                    ("acme", "llama-test", "us-test", "reserved")).scope.spill  # fmt: skip
    # Settled where it was charged (the levels themselves: test_spillover_contract.py, on slow buckets).
    assert done.json()["actual_wt"] == 120.0 and store.inflight(spill.inflight_key) == 0
    services.events.buffer().flush()
    kinds = [(e["decision"], e.get("source_kind")) for e in sink.events if e["tenant"] == "acme"]
    assert ("admit", "spillover") in kinds and ("complete", "spillover") in kinds


def test_the_middleware_reads_overflow_from_its_header_and_names_it_when_bad():
    from admission.asgi import BadRequest, default_resolve

    h = {"x-headroom-tenant": "acme", "x-headroom-region": "us-test", "x-headroom-prompt-tokens": "5"}
    body = {"model": "llama-test", "max_tokens": 10}
    assert default_resolve({}, h, body)["overflow"] is None  # the entitlement's default
    assert default_resolve({}, {**h, "x-headroom-overflow": "deny"}, body)["overflow"] == "deny"
    with pytest.raises(BadRequest) as bad:
        default_resolve({}, {**h, "x-headroom-overflow": "maybe"}, body)
    assert bad.value.field == "x-headroom-overflow"
