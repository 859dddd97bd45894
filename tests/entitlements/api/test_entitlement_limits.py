"""Budgets and request rates on the entitlement API (issue 23): create, amend, read, history, 400s."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from entitlements.models import Entitlement

URL = "/api/v1/entitlements"
LIMITS = ("daily_budget", "monthly_budget", "budget_unit", "budget_tz", "max_rps", "burst")


def _body(**over):
    start = timezone.now() - timedelta(minutes=5)
    body = {
        "tenant": "acme", "model": "llama-test", "region": "us-test", "traffic_class": "reserved", "cu": "10",
        "starts_at": start.isoformat(), "ends_at": (start + timedelta(days=30)).isoformat(),
        "max_prompt_tokens": 8000, "max_output_tokens": 2000, "prompt_p50": 1000, "prompt_p95": 4000,
        "output_p50": 200, "output_p95": 800, "max_concurrency": 64, "ttft_p99_ms": 2000, "tpot_p99_ms": 200,
        "reason": "budgets",
    }  # fmt: skip
    body.update(over)
    return body


def _create(client_for, **over):
    return client_for("operator").post(URL, _body(**over), format="json")


def test_create_with_budgets_reads_them_back_and_burst_defaults_to_max_rps(client_for, fleet):
    r = _create(client_for, daily_budget=1_000_000, monthly_budget=20_000_000, budget_unit="tokens",
                budget_tz="Asia/Tokyo", max_rps=2.5)  # fmt: skip
    assert r.status_code == 201, r.json()
    d = r.json()
    assert {k: d[k] for k in LIMITS} == {
        "daily_budget": 1_000_000, "monthly_budget": 20_000_000, "budget_unit": "tokens", "budget_tz": "Asia/Tokyo",
        "max_rps": 2.5, "burst": 3,
    }  # fmt: skip


def test_without_limits_nothing_is_limited(client_for, fleet):
    d = _create(client_for).json()
    assert {k: d[k] for k in LIMITS} == {
        "daily_budget": None, "monthly_budget": None, "budget_unit": "wt", "budget_tz": "UTC", "max_rps": None,
        "burst": None,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"daily_budget": -1}, "daily_budget"),  # 0 is allowed: a budget that refuses every request
        ({"monthly_budget": -5}, "monthly_budget"),
        ({"daily_budget": "lots"}, "daily_budget"),
        ({"budget_unit": "dollars"}, "budget_unit"),
        ({"budget_tz": "Mars/Olympus"}, "budget_tz"),
        ({"budget_tz": "+09:00"}, "budget_tz"),
        ({"max_rps": 0}, "max_rps"),
        ({"max_rps": -1}, "max_rps"),
        ({"burst": 0, "max_rps": 1}, "burst"),
        ({"burst": 5}, "burst"),  # a burst without a rate
        ({"daily_budget": 1e308}, "daily_budget"),  # the oddest values: past any column, below any unit
        ({"monthly_budget": 1e-320}, "monthly_budget"),
        ({"max_rps": 1e308}, "max_rps"),
        ({"budget_tz": "Asia/To\u0000kyo"}, "budget_tz"),
        ({"budget_tz": "x" * 10_000}, "budget_tz"),
    ],
)
def test_bad_limits_are_400s_naming_the_field_and_nothing_is_created(client_for, fleet, over, field):
    r = _create(client_for, **over)
    assert r.status_code == 400
    assert list(r.json()["error"]["fields"]) == [field], r.json()
    assert not Entitlement.objects.exists()


def test_amend_sets_changes_and_clears_limits_with_history(client_for, fleet):
    ent = _create(client_for).json()
    op = client_for("operator")
    url = f"{URL}/{ent['id']}"
    r = op.patch(url, {"daily_budget": 5000, "max_rps": 10, "reason": "cap the pilot"}, format="json")
    assert r.status_code == 200, r.json()
    assert (r.json()["daily_budget"], r.json()["max_rps"], r.json()["burst"], r.json()["version"]) == (
        5000,
        10.0,
        10,
        2,
    )
    r = op.patch(url, {"burst": 40, "reason": "spiky"}, format="json")
    assert r.json()["burst"] == 40
    r = op.patch(url, {"max_rps": None, "daily_budget": None, "reason": "lifted"}, format="json")
    assert (r.json()["max_rps"], r.json()["burst"], r.json()["daily_budget"]) == (None, None, None)
    # A bad amendment changes nothing.
    bad = op.patch(url, {"budget_tz": "Nowhere/City", "daily_budget": 10, "reason": "x"}, format="json")
    assert bad.status_code == 400 and list(bad.json()["error"]["fields"]) == ["budget_tz"]
    assert Entitlement.objects.get().daily_budget is None
    changes = [h["changes"] for h in op.get(url).json()["history"] if h["op"] == "update"]
    assert changes[0]["daily_budget"] == {"from": None, "to": 5000}
    assert changes[1]["burst"] == {"from": 10, "to": 40}


def test_limits_in_the_gateway_snapshot_and_its_version_moves(client_for, fleet):
    ent = _create(client_for).json()
    gw = client_for("gateway")
    first = gw.get(f"{URL}/snapshot")
    client_for("operator").patch(f"{URL}/{ent['id']}", {"monthly_budget": 9, "budget_unit": "requests",
                                                        "reason": "trial"}, format="json")  # fmt: skip
    second = gw.get(f"{URL}/snapshot", HTTP_IF_NONE_MATCH=first["ETag"])
    assert second.status_code == 200
    e = second.json()["entitlements"][0]
    assert (e["monthly_budget"], e["budget_unit"], e["daily_budget"]) == (9, "requests", None)
