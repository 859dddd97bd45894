"""admission.budgets: how a scope's entitlements add up, and the keys a reservation's periods have."""

from __future__ import annotations

from datetime import UTC, datetime

from admission import budgets
from admission.budgets import LimitSpec, combine, spec_of


def test_spec_of_an_entitlement_and_burst_defaulting_to_max_rps():
    assert spec_of({"budget_unit": "wt", "budget_tz": "UTC"}) is None
    assert spec_of({"daily_budget": 10, "budget_unit": "tokens", "budget_tz": "Asia/Tokyo"}) == LimitSpec(
        "tokens", "Asia/Tokyo", daily=10.0
    )
    assert spec_of({"max_rps": 0.5}).burst == 1.0
    assert spec_of({"max_rps": 4, "burst": 9}).burst == 9.0


def test_same_unit_budgets_and_rates_sum_a_missing_budget_adds_nothing_another_unit_is_not_added():
    a = LimitSpec("wt", "UTC", daily=100.0, max_rps=2.0, burst=2.0)
    assert combine(a, LimitSpec("wt", "Asia/Tokyo", daily=50.0, monthly=7.0)) == LimitSpec(
        "wt", "UTC", daily=150.0, monthly=7.0, max_rps=2.0, burst=2.0
    )
    assert combine(a, LimitSpec("requests", "UTC", daily=5.0, max_rps=1.0, burst=3.0)) == LimitSpec(
        "wt", "UTC", daily=100.0, max_rps=3.0, burst=5.0
    )
    only_rate = LimitSpec("wt", "UTC", max_rps=1.0, burst=1.0)
    assert combine(only_rate, LimitSpec("tokens", "Asia/Tokyo", daily=9.0)) == LimitSpec(
        "tokens", "Asia/Tokyo", daily=9.0, max_rps=1.0, burst=1.0
    )
    assert combine(None, a) == a and combine(a, None) == a


def test_keys_around_name_the_periods_a_reservation_may_have_been_charged_to():
    lim = budgets.limits_for(LimitSpec("wt", "UTC", daily=1.0, monthly=2.0), "adm:{p1}:", "acme::m:r:reserved")
    t = datetime(2026, 12, 1, 0, 0, 1, tzinfo=UTC).timestamp()
    assert budgets.keys_around(lim, t) == [
        "adm:{p1}:bd:acme::m:r:reserved:d:20261130", "adm:{p1}:bd:acme::m:r:reserved:d:20261201",
        "adm:{p1}:bd:acme::m:r:reserved:d:20261202", "adm:{p1}:bd:acme::m:r:reserved:m:202611",
        "adm:{p1}:bd:acme::m:r:reserved:m:202612", "adm:{p1}:bd:acme::m:r:reserved:m:202701",
    ]  # fmt: skip
    assert budgets.keys_around(None, t) == []
