"""Usage carried into a period bucket (issue 24.1: import_atlas) on both backends: it is set, not
added, and a reserve that would take it over the budget is refused BUDGET_EXHAUSTED."""

from __future__ import annotations

from admission.backends.base import Period
from entitlements import limits
from tests.admission.test_budget_contract import Clock, lop, noon, used


def test_seeded_usage_counts_against_the_budget_and_a_second_seed_sets_it_again(store):
    clock = Clock(store)
    noon(clock)
    period = Period(limits.DAILY, f"{store.prefix}bd:s1:d", 1000.0)
    store.seed_period_usage(period, "UTC", 700.0)
    store.seed_period_usage(period, "UTC", 700.0)  # set, not add: a second import changes nothing
    assert used(store, clock) == 700.0
    got = store.reserve(lop(store, cost=301.0, daily=1000))  # 700 + 301 > 1000
    assert got.raw.startswith("T|BUDGET_EXHAUSTED|")
    assert store.reserve(lop(store, cost=300.0, daily=1000)).admitted  # 700 + 300 = the budget
    assert used(store, clock) == 1000.0


def test_seeding_the_monthly_bucket_leaves_the_daily_one_alone(store):
    clock = Clock(store)
    noon(clock)
    store.seed_period_usage(Period(limits.MONTHLY, f"{store.prefix}bd:s1:m", 5000.0), "UTC", 4950.0)
    assert used(store, clock, kind=limits.MONTHLY) == 4950.0
    assert used(store, clock) is None
    got = store.reserve(lop(store, cost=100.0, daily=1000, monthly=5000))
    assert got.raw.startswith("T|BUDGET_EXHAUSTED|")
