"""$ budgets through the serving API (issue 51.3): set by an operator (audited), held at reserve,
settled at complete at the pool's $ per weighted token, refused BUDGET_EXHAUSTED with `limit: "usd"`
and the remaining-$ header, for a tenant and for a project; a tenant without one pays no extra call."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

import pytest

from admission import events, params, usd
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Project, UsdBudgetChange
from entitlements.usd_per_token import usd_per_wt
from tests.admission.world import body, build_world, client_for

RESERVE, COMPLETE, BUDGETS = "/api/v1/admission/reserve", "/api/v1/admission/complete", "/api/v1/usd-budgets"


@pytest.fixture
def w(fleet, memory_store, sink):
    world = build_world(fleet)
    acc = world.pool.accelerator
    acc.cloud_on_demand_per_hour = 3.0  # the test catalogue has no price: $3 an accelerator-hour
    acc.save()
    return world


@pytest.fixture
def op():
    return client_for("usd-op", "operator")


def reserve(w, rid, tenant="acme", **kw):
    return w.gateway.post(RESERVE, body(tenant, "reserved" if tenant == "acme" else "best_effort", rid, **kw),
                          format="json")  # fmt: skip


def price(w) -> float:
    w.pool.refresh_from_db()
    got = usd_per_wt(w.pool)
    # One CU-hour is R × 3,600 wt (R = 1,000 here): the $ per wt is the pool's $ per CU-hour over that.
    assert got == pool_cu_hour_rate(w.pool).usd_per_cu_hour / 3_600_000
    return got


def test_a_tenant_budget_holds_each_estimate_refuses_at_the_limit_and_settles_the_actual(w, op, sink):
    p = price(w)
    # Each request estimates 200 + 4 × 200 = 1,000 wt: room for exactly two and a half.
    limit = 2500 * p
    r = op.put(BUDGETS, {"tenant": "acme", "budget_usd": limit, "reason": "finance cap"}, format="json")
    assert r.status_code == 200, r.content
    first = reserve(w, "u-1")
    assert first.status_code == 200
    assert float(first["x-headroom-budget-remaining-usd"]) == pytest.approx(1500 * p, abs=0.006)
    assert reserve(w, "u-2").status_code == 200
    t0 = time.time()
    refused = reserve(w, "u-3")
    assert refused.status_code == 429
    d = refused.json()
    assert (d["reason"], d["limit"], d["responsible"]) == ("BUDGET_EXHAUSTED", "usd", "tenant")
    assert refused["x-headroom-budget-remaining-usd"] == usd.remaining_header(500 * p)
    end = usd.month_end(t0)
    assert math.ceil(end - time.time()) - 1 <= d["retry_after_s"] <= math.ceil(end - t0)
    # The first completes at 200 + 4 × 50 = 400 wt: 600 wt of $ back, so a 1,000 wt estimate fits.
    done = {"reservation_id": first.json()["reservation_id"], "prompt_tokens": 200, "output_tokens": 50, "status": "ok"}
    assert w.gateway.post(COMPLETE, done, format="json").status_code == 200
    assert reserve(w, "u-4").status_code == 200
    rows = op.get(BUDGETS).json()["results"]
    assert rows == [{"tenant": "acme", "project": None, "budget_usd": limit, "month": usd.month_id(time.time()),
                     "charged_usd": round(400 * p, 6), "held_usd": round(2000 * p, 6),
                     "remaining_usd": round(limit - 2400 * p, 6), "used_pct": round(100 * 2400 * p / limit, 2)}]  # fmt: skip
    events.buffer().flush()
    assert [(e["reason"], e.get("limit")) for e in sink.of("throttle")] == [("BUDGET_EXHAUSTED", "usd")]


def test_a_refused_token_reserve_releases_its_hold(w, op):
    p = price(w)
    op.put(BUDGETS, {"tenant": "acme", "budget_usd": 1e6 * p, "reason": "cap"}, format="json")
    admitted = 0
    for i in range(30):  # 1,000 wt each against a 12,000 wt bucket refilling at 200 wt/s
        got = reserve(w, f"q-{i}")
        if got.status_code != 200:
            assert got.json()["reason"] == "QUOTA_EXCEEDED"
            break
        admitted += 1
    else:
        pytest.fail("the token bucket never refused")
    row = op.get(BUDGETS).json()["results"][0]
    assert (row["charged_usd"], row["held_usd"]) == (0.0, round(admitted * 1000 * p, 6))


def test_a_project_budget_binds_its_project_only(w, op, fleet):
    Project.objects.create(tenant=fleet.acme, slug="web", name="Web")
    p = price(w)
    r = op.put(BUDGETS, {"tenant": "acme", "project": "web", "budget_usd": 1000 * p, "reason": "pilot"}, format="json")
    assert r.status_code == 200, r.content
    assert reserve(w, "p-1", project="web").status_code == 200
    assert reserve(w, "p-2", project="web").json()["limit"] == "usd"
    ok = reserve(w, "p-3")  # the tenant's other traffic: no $ budget of its own
    assert ok.status_code == 200 and "x-headroom-budget-remaining-usd" not in ok


def test_no_budget_no_hold_no_header(w, memory_store):
    got = reserve(w, "n-1")
    assert got.status_code == 200 and "x-headroom-budget-remaining-usd" not in got
    assert params.current().usd is usd.EMPTY
    assert memory_store.usd._acc == {}


def test_a_zero_budget_refuses_every_request(w, op):
    op.put(BUDGETS, {"tenant": "acme", "budget_usd": 0, "reason": "frozen"}, format="json")
    assert reserve(w, "z-1").json()["limit"] == "usd"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"tenant": "acme", "budget_usd": 1e308, "reason": "x"}, "budget_usd"),
        ({"tenant": "acme", "budget_usd": -1, "reason": "x"}, "budget_usd"),
        ({"tenant": "acme", "budget_usd": 10**400, "reason": "x"}, "budget_usd"),
        ({"tenant": "acme", "project": ["web"], "budget_usd": 5, "reason": "x"}, "project"),
        ({"tenant": "acme", "budget_usd": "lots", "reason": "x"}, "budget_usd"),
        ({"tenant": "acme", "reason": "x"}, "budget_usd"),
        ({"tenant": "nobody", "budget_usd": 5, "reason": "x"}, "tenant"),
        ({"tenant": "ac\x00me", "budget_usd": 5, "reason": "x"}, "tenant"),
        ({"tenant": "acme", "budget_usd": 5, "reason": "why\x00"}, "reason"),
        ({"tenant": "acme", "project": "nope", "budget_usd": 5, "reason": "x"}, "project"),
        ({"tenant": "acme", "budget_usd": 5, "reason": " "}, "reason"),
    ],
)
def test_bad_input_is_a_400_naming_the_field_and_keeps_the_budget(w, op, payload, field):
    op.put(BUDGETS, {"tenant": "acme", "budget_usd": 7.5, "reason": "first"}, format="json")
    r = op.put(BUDGETS, payload, format="json")
    assert r.status_code == 400 and list(r.json()["error"]["fields"]) == [field], r.content
    assert op.get(BUDGETS).json()["results"][0]["budget_usd"] == 7.5


def test_changes_are_audited_and_only_operators_write_and_members_see_their_own(w, op, fleet):
    op.put(BUDGETS, {"tenant": "acme", "budget_usd": 10, "reason": "q1 cap"}, format="json")
    op.put(BUDGETS, {"tenant": "globex", "budget_usd": 20, "reason": "cap"}, format="json")
    op.put(BUDGETS, {"tenant": "acme", "budget_usd": None, "reason": "lifted"}, format="json")
    ch = UsdBudgetChange.objects.filter(tenant=fleet.acme).order_by("pk")
    assert [(c.old_usd, c.new_usd, c.reason, c.actor.username) for c in ch] == [
        (None, 10.0, "q1 cap", "usd-op"), (10.0, None, "lifted", "usd-op")]  # fmt: skip
    assert w.gateway.put(BUDGETS, {"tenant": "acme", "budget_usd": 1, "reason": "x"}, format="json").status_code == 403
    month = usd.month_id(datetime.now(UTC).timestamp())
    assert [r["tenant"] for r in op.get(BUDGETS).json()["results"]] == ["globex"] and month
