"""Budgets and request rates through the serving API (issue 23), from the entitlement's fields to
the 429 a gateway sees, on the in-process backend (the Redis script is the contract suite's subject)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

import pytest

from admission import events
from entitlements.services import entitlement_amend
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def limit(w, **fields):
    """Set limits on acme's reserved entitlement (200 wt/s, 12,000 wt deep: the rate never binds here)."""
    entitlement_amend(actor=w.fleet.operator, reason="budget", entitlement=w.lender, **fields)


def reserve(w, rid, **kw):
    return w.gateway.post(RESERVE, body("acme", "reserved", rid, **kw), format="json")


def test_a_spent_daily_budget_is_budget_exhausted_until_midnight_and_a_refund_reopens_it(w, sink):
    limit(w, daily_budget=2500)  # wt; each request below estimates 200 + 4 × 200 = 1000 wt
    first = reserve(w, "b-1")
    assert reserve(w, "b-2").status_code == 200
    t0 = time.time()
    r = reserve(w, "b-3")
    t1 = time.time()
    assert r.status_code == 429
    d = r.json()
    assert (d["reason"], d["responsible"]) == ("BUDGET_EXHAUSTED", "tenant")
    # Seconds to the next UTC midnight on the store's clock, rounded up, read between t0 and t1.
    midnight = (datetime.fromtimestamp(t0, UTC) + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    assert math.ceil(midnight.timestamp() - t1) <= d["retry_after_s"] <= math.ceil(midnight.timestamp() - t0)
    assert r["Retry-After"] == str(d["retry_after_s"])
    assert "limit" not in d
    # The first request used 200 + 4 × 50 = 400 wt: 600 back to today's budget.
    done = {"reservation_id": first.json()["reservation_id"], "prompt_tokens": 200, "output_tokens": 50, "status": "ok"}
    assert w.gateway.post(COMPLETE, done, format="json").status_code == 200
    assert reserve(w, "b-4", out=100).status_code == 200  # 600 wt: 2,000 of 2,500 (2,600 without the refund)
    events.buffer().flush()
    assert [e["reason"] for e in sink.of("throttle")] == ["BUDGET_EXHAUSTED"]


def test_tokens_count_prompt_plus_output_whatever_the_weights(w):
    limit(w, daily_budget=700, budget_unit="tokens")
    assert reserve(w, "t-1", prompt=200, out=200).status_code == 200  # 400 tokens (1,000 wt)
    assert reserve(w, "t-2", prompt=200, out=200).json()["reason"] == "BUDGET_EXHAUSTED"  # 800 > 700
    assert reserve(w, "t-3", prompt=100, out=200).status_code == 200  # 700


def test_raising_the_budget_applies_at_once_and_clearing_it_lifts_it(w):
    limit(w, daily_budget=1, budget_unit="requests")
    assert reserve(w, "q-1").status_code == 200
    assert reserve(w, "q-2").json()["reason"] == "BUDGET_EXHAUSTED"
    limit(w, daily_budget=2)
    assert reserve(w, "q-3").status_code == 200  # the same period's use, a higher limit
    assert reserve(w, "q-4").status_code == 429
    limit(w, daily_budget=None)
    assert reserve(w, "q-5").status_code == 200


def test_request_rate_burst_then_quota_exceeded_with_limit_rps(w, sink):
    limit(w, max_rps=0.01, burst=2)
    assert [reserve(w, f"r-{i}").status_code for i in range(2)] == [200, 200]
    r = reserve(w, "r-2")
    assert r.status_code == 429
    assert (r.json()["reason"], r.json()["limit"], r.json()["retry_after_s"]) == ("QUOTA_EXCEEDED", "rps", 100)
    again = reserve(w, "r-2")  # a replay: the same answer, its limit too
    assert again.json() == r.json()
    events.buffer().flush()
    assert [(e["reason"], e["limit"]) for e in sink.of("throttle")] == [("QUOTA_EXCEEDED", "rps")]


def test_the_token_rate_throttle_says_limit_rate(w):
    assert reserve(w, "x-0", prompt=2000, out=2000).status_code == 200  # 10,000 of 12,000 wt
    r = reserve(w, "x-1", prompt=2000, out=2000)
    assert (r.status_code, r.json()["reason"], r.json()["limit"]) == (429, "QUOTA_EXCEEDED", "rate")


def test_a_complete_the_store_forgot_still_charges_the_budget(w, memory_store):
    limit(w, daily_budget=2000)
    first = reserve(w, "l-1").json()  # 1,000 wt estimated
    memory_store.clear()  # the store lost everything: the reserve's debit and today's use
    done = {"reservation_id": first["reservation_id"], "prompt_tokens": 200, "output_tokens": 300, "status": "ok"}
    assert w.gateway.post(COMPLETE, done, format="json").json()["actual_wt"] == 1400.0  # charged from the signed id
    assert reserve(w, "l-2", out=150).json()["reason"] == "BUDGET_EXHAUSTED"  # 1,400 + 800 > 2,000
    assert reserve(w, "l-3", out=100).status_code == 200  # 1,400 + 600: exactly the budget
