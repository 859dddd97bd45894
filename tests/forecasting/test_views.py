"""Planning pages: staff page with status polling and run-now, tenants' own forecast page."""

from __future__ import annotations

import pytest

from forecasting.models import ForecastRun
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


def test_operator_sees_what_needs_action_and_the_run_button(web_for, finished):
    html = web_for("operator").get("/planning/").content.decode()
    # Demand of 20-30 CU against 280 CU pools: nothing is short.
    assert 'id="all-covered"' in html and 'id="action-list"' not in html
    assert 'href="/planning/pools/pool-a/"' in html and 'href="/planning/pools/pool-b/"' in html
    assert "Run forecast now" in html
    assert 'hx-trigger="every 2s"' not in html  # the latest run is done: nothing to poll


def test_a_pool_page_has_its_gaps_chart_orders_and_cost(web_for, finished):
    html = web_for("operator").get("/planning/pools/pool-a/").content.decode()
    assert 'id="fan-pool-a"' in html and 'data-figure="fan-pool-a-fig"' in html
    assert 'data-pool="pool-a" data-scenario="stress" data-case="failure"' in html
    assert 'id="orders"' in html and 'id="cost"' in html and 'id="wrong-table"' in html
    assert web_for("operator").get("/planning/pools/no-such-pool/").status_code == 404
    assert web_for("member").get("/planning/pools/pool-a/").status_code == 403


def test_approver_sees_the_page_without_the_run_button(web_for, finished):
    html = web_for("approver").get("/planning/").content.decode()
    assert 'id="needs-action"' in html
    assert "Run forecast now" not in html
    assert web_for("approver").post("/planning/runs/").status_code == 403
    assert ForecastRun.objects.count() == 1


def test_status_partial_polls_while_a_run_is_in_progress_and_stops_when_done(web_for, finished):
    run = ForecastRun.objects.create(status="running", progress=40, attempts=1)
    html = web_for("operator").get("/planning/status/").content.decode()
    assert 'hx-trigger="every 2s"' in html and 'value="40"' in html and "<h1>" not in html
    ForecastRun.objects.filter(pk=run.pk).update(status="succeeded", progress=100)
    html = web_for("operator").get("/planning/status/").content.decode()
    assert 'hx-trigger="every 2s"' not in html and 'data-status="succeeded"' in html


def test_run_now_queues_a_run_and_returns_the_status_row(web_for, fleet, monkeypatch):
    from forecasting import tasks

    monkeypatch.setattr(tasks.run_forecast, "delay", lambda run_id: None)
    response = web_for("operator").post("/planning/runs/", HTTP_HX_REQUEST="true")
    run = ForecastRun.objects.get()
    assert (run.status, run.trigger, run.requested_by.username) == ("queued", "manual", "op")
    assert 'data-status="queued"' in response.content.decode()


@pytest.mark.parametrize("who", ["member", "outsider"])
def test_tenant_members_are_sent_to_their_own_page(web_for, finished, who):
    response = web_for(who).get("/planning/")
    assert (response.status_code, response["Location"]) == (302, "/planning/mine/")
    assert web_for(who).get("/planning/status/").status_code == 403
    assert web_for(who).post("/planning/runs/").status_code == 403


def test_a_member_sees_only_their_tenants_series(web_for, finished):
    acme = web_for("member").get("/planning/mine/").content.decode()
    globex = web_for("outsider").get("/planning/mine/").content.decode()
    assert "acme \\u00b7 llama-test" in acme and "globex" not in acme
    assert "globex \\u00b7 llama-test" in globex and "acme" not in globex


def test_platform_people_have_no_own_page(web_for, finished):
    assert web_for("operator").get("/planning/mine/").status_code == 403


def test_the_order_line_says_where_each_replica_goes_and_checks_the_failure_case(web_for, finished):
    # 20 CU of demand → 300 CU at stress after failure (2 + 2 replicas of 70 CU, a zone lost: 140 left):
    # the order puts 3 in each zone (5 + 5: 350 after losing one), which the line shows.
    from forecasting.models import PoolDemand

    PoolDemand.objects.filter(run=finished, pool__slug="pool-a").update(
        hourly={k: [200.0 * f] * (26 * 168) for k, f in (("expected", 1.0), ("upside", 1.2), ("stress", 1.5))}
    )
    html = web_for("operator").get("/planning/pools/pool-a/").content.decode()
    line = html.split('id="order-check">')[1].split("</p>")[0]
    assert "3 in us-test-a, 3 in us-test-b" in line
    assert "350" in line and "after failure" in line and "closed in both cases" in line
    actions = web_for("operator").get("/planning/").content.decode()
    assert 'data-replicas="6"' in actions and "3 in us-test-a, 3 in us-test-b" in actions
