"""The planning page's first screen (issue 22): pools short in some scenario and case, late first, each
with its gap, replicas short and the accelerator to order; the run's state and step while it runs."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from forecasting.models import ForecastRun, PoolDemand
from portal.planning_actions import action_rows
from tests.clients import web_client


@pytest.fixture
def web_for(people):
    return lambda who: web_client(people[who])


@pytest.fixture(autouse=True)
def priced(fleet):
    """The planning pages price idle replicas (cost of being wrong, stranded capacity): the test
    accelerator needs a cloud rate, as the catalogue's have."""
    from entitlements.models import Accelerator

    Accelerator.objects.update(cloud_on_demand_per_hour=2.0)


def _gap(first_week, order_by, gap, replicas, late=False):
    return {"first_week": first_week, "order_by": order_by, "late": late, "max_gap_cu": gap, "replicas_short": replicas}


COVERED = _gap(None, None, 0.0, 0)


def _pool(slug, gaps):
    cases = {s: {"healthy": COVERED, "failure": COVERED} for s in ("committed", "expected", "upside", "stress")}
    for (scenario, case), g in gaps.items():
        cases[scenario] = {**cases[scenario], case: g}
    return {"pool": slug, "accelerator": "h100", "lead_time_weeks": 12, "failure_policy": "zone", "gaps": cases}


def test_action_rows_sort_late_first_then_by_order_by_and_skip_covered_pools():
    d = date(2026, 12, 1)
    pools = [
        _pool("covered", {}),
        _pool("later", {("stress", "failure"): _gap(d + timedelta(weeks=20), d + timedelta(weeks=8), 40.0, 2)}),
        _pool(
            "late",
            {
                ("upside", "healthy"): _gap(d + timedelta(weeks=5), d - timedelta(weeks=7), 10.0, 1, late=True),
                ("stress", "failure"): _gap(d + timedelta(weeks=3), d - timedelta(weeks=9), 60.0, 3, late=True),
            },
        ),
        _pool("sooner", {("expected", "healthy"): _gap(d + timedelta(weeks=14), d + timedelta(weeks=2), 5.0, 1)}),
    ]
    rows = action_rows(pools)
    assert [r["pool"] for r in rows] == ["late", "sooner", "later"]
    late = rows[0]
    # The most urgent shortfall leads (earliest order-by); the other stays listed beside it.
    assert (late["first"]["scenario"], late["first"]["case"], late["first"]["replicas_short"]) == (
        "stress",
        "failure",
        3,
    )
    assert [(s["scenario"], s["case"]) for s in late["others"]] == [("upside", "healthy")]
    assert late["late"] and not rows[1]["late"]


def test_a_short_pool_is_listed_with_its_gap_replicas_and_accelerator(web_for, finished, fleet):
    # pool-a's demand far above its 280 CU: short from the first week, so its order-by date is long past.
    PoolDemand.objects.filter(run=finished, pool=fleet.pool_a).update(
        hourly={k: [600.0 * f] * (26 * 168) for k, f in (("expected", 1.0), ("upside", 1.2), ("stress", 1.5))}
    )
    html = web_for("operator").get("/planning/").content.decode()
    assert 'id="action-list"' in html and 'id="all-covered"' not in html
    assert 'data-pool="pool-a" data-late="yes"' in html and 'data-pool="pool-b"' not in html.split('id="pool-list"')[0]
    row = html.split('data-pool="pool-a" data-late="yes"')[1].split("</tr>")[0]
    accelerator = fleet.pool_a.accelerator.slug
    assert f"× {accelerator}</strong>" in row and "late" in row and " CU</td>" in row
    pool_page = web_for("approver").get("/planning/pools/pool-a/").content.decode()
    assert "Order " in pool_page and f"× {accelerator} replica" in pool_page


def test_running_run_shows_state_step_and_progress_and_a_failed_one_says_why(web_for, finished):
    run = ForecastRun.objects.create(status="running", progress=40, attempts=1, claimed_by="celery@w1")
    html = web_for("operator").get("/planning/status/").content.decode()
    assert 'hx-trigger="every 2s"' in html and 'data-status="running"' in html
    assert "forecasting series batch by batch" in html and "celery@w1" in html and 'value="40"' in html
    ForecastRun.objects.filter(pk=run.pk).update(status="queued", progress=0)
    assert "waiting for a worker" in web_for("operator").get("/planning/status/").content.decode()
    ForecastRun.objects.filter(pk=run.pk).update(status="failed", error="no demand history in the lookback window")
    html = web_for("operator").get("/planning/status/").content.decode()
    assert 'hx-trigger="every 2s"' not in html
    assert 'id="run-error"' in html and "no demand history in the lookback window" in html


def test_no_finished_run_says_so(web_for, fleet):
    html = web_for("operator").get("/planning/").content.decode()
    assert 'id="no-forecast"' in html and "No forecast has run yet" in html
