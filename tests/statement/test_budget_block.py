"""The statement's `budget` block (issue 23): each period budget's limit and what was settled against
it, in the budget's unit and time zone, read from the rollups (telemetry.budgets.budget_usage)."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from zoneinfo import ZoneInfo

import pytest

from entitlements.services import entitlement_amend
from telemetry.budgets import budget_usage
from telemetry.statement import statement
from tests.clients import web_client
from tests.telemetry.helpers import T0

H = timedelta(hours=1)


def _budget(ent, fleet, **fields):
    return entitlement_amend(actor=fleet.operator, reason="budget", entitlement=ent, **fields)


@pytest.mark.django_db
def test_no_budget_no_block(known):
    assert statement(known, T0, T0 + 2 * H)["budget"] is None


@pytest.mark.django_db
def test_wt_budget_counts_settled_weighted_tokens_of_the_day_and_month(known, fleet):
    ent = _budget(known, fleet, daily_budget=200_000, monthly_budget=1_000_000)
    b = statement(ent, T0, T0 + 2 * H)["budget"]
    assert b["unit"] == "wt" and b["tz"] == "UTC"
    # c1 … c5 settled 132,000 wt by T0 + 2 h, all on T0's UTC day and month
    assert {k: b["daily"][k] for k in ("limit", "used", "share")} == {"limit": 200_000, "used": 132_000, "share": 0.66}
    assert b["monthly"]["used"] == 132_000 and b["monthly"]["limit"] == 1_000_000
    assert b["daily"]["period"] == T0.strftime("%Y%m%d") and b["monthly"]["period"] == T0.strftime("%Y%m")
    assert b["daily"]["resets_at"] == (T0.replace(hour=0) + timedelta(days=1)).isoformat()


@pytest.mark.django_db
def test_tokens_and_requests_units(known, fleet):
    ent = _budget(known, fleet, daily_budget=10_000, budget_unit="tokens")
    # prompt + output of the five settled: 1,200 + 3,600 + 300 + 600 + 150
    assert budget_usage(ent, at=T0 + 2 * H)["daily"]["used"] == 5850
    ent = _budget(ent, fleet, budget_unit="requests")
    # admitted: a0 … a4 and "early" (T0 − 30 min, the same day); "late" (T0 + 3 h) is after `at`
    assert budget_usage(ent, at=T0 + 2 * H)["daily"]["used"] == 6
    assert budget_usage(ent, at=T0 + 2 * H)["monthly"] is None


@pytest.mark.django_db
def test_the_day_is_the_budget_time_zones_day(known, fleet):
    # UTC+11 all year: T0 (12:00 UTC) is 23:00 there, so T0 + 1 h starts the next local day
    ent = _budget(known, fleet, daily_budget=100_000, budget_tz="Pacific/Noumea")
    day = budget_usage(ent, at=T0 + 2 * H)["daily"]
    assert day["used"] == 18_000  # c3 (12,000) and c4 (6,000), settled after local midnight
    assert day["start"] == (T0 + H).astimezone(ZoneInfo("Pacific/Noumea")).isoformat()


@pytest.mark.django_db
def test_page_and_csv_show_the_budget(known, fleet):
    _budget(known, fleet, daily_budget=200_000)
    period = {"start": T0.isoformat(), "end": (T0 + 2 * H).isoformat()}
    viewer = web_client(fleet.operator)
    page = viewer.get(f"/entitlements/{known.uuid}/statement/", period).content.decode()
    assert 'id="budget"' in page and 'data-budget="daily"' in page and "132000" in page and "66 %" in page
    assert 'data-budget="monthly"' not in page
    table = dict(
        csv.reader(io.StringIO(viewer.get(f"/entitlements/{known.uuid}/statement.csv", period).content.decode()))
    )
    assert (table["budget.unit"], table["budget.daily.limit"], table["budget.daily.used"]) == (
        "wt",
        "200000",
        "132000.0",
    )
