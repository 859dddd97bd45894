"""Planning API: who sees which forecasts, who reads gap and cost, who starts runs."""

from __future__ import annotations

import pytest

from forecasting.models import ForecastRun

WHO = ["member", "teammate", "outsider", "approver", "operator", "gateway"]


def test_staff_see_every_tenants_forecast(api_for, finished):
    for who in ("approver", "operator"):
        body = api_for(who).get("/api/v1/forecasts").json()
        assert [s["tenant"] for s in body["series"]] == ["acme", "globex"]
        assert body["run"]["id"] == str(finished.id)


def test_members_see_only_their_own_tenants_forecast(api_for, finished):
    for who, tenant in (("member", "acme"), ("teammate", "acme"), ("outsider", "globex")):
        body = api_for(who).get("/api/v1/forecasts").json()
        assert [s["tenant"] for s in body["series"]] == [tenant]
    series = api_for("member").get("/api/v1/forecasts").json()["series"][0]
    assert series["weekly"]["upside_peak"][0] == 12.0
    # docs/contract.md §8: the chosen method, every candidate's selection and holdout error, coverage
    assert {k: series[k] for k in ("method", "error_metric", "holdout_error", "coverage")} == {
        "method": "mstl",
        "error_metric": "wape",
        "holdout_error": 0.05,
        "coverage": {"p50": 0.52, "p90": 0.88, "p99": 0.99},
    }
    assert series["candidates"][2] == {"method": "mstl", "selection_error": 0.04, "holdout_error": 0.05}
    assert series["best_naive_holdout_error"] == 0.07


def test_another_tenants_forecast_is_a_404_and_reveals_nothing(api_for, finished):
    response = api_for("outsider").get("/api/v1/forecasts?tenant=acme")
    assert response.status_code == 404
    assert "acme" not in response.content.decode().replace("/api/v1/forecasts?tenant=acme", "")
    assert api_for("member").get("/api/v1/forecasts?tenant=acme").status_code == 200
    assert api_for("operator").get("/api/v1/forecasts?tenant=nobody").status_code == 404


@pytest.mark.parametrize(
    ("who", "code"), [("member", 403), ("outsider", 403), ("gateway", 403), ("approver", 200), ("operator", 200)]
)
def test_supply_gap_and_cost_are_for_staff(api_for, finished, who, code):
    assert api_for(who).get("/api/v1/supply-gap").status_code == code
    assert api_for(who).get("/api/v1/cost").status_code == code
    assert api_for(who).get("/api/v1/forecasts").status_code == (403 if who == "gateway" else 200)


def test_supply_gap_lists_each_pool_with_26_weeks(api_for, finished):
    body = api_for("approver").get("/api/v1/supply-gap").json()
    assert [p["pool"] for p in body["pools"]] == ["pool-a", "pool-b"]
    assert [len(p["weeks"]) for p in body["pools"]] == [26, 26]
    assert body["pools"][0]["weeks"][0]["healthy_cu"] == 280.0
    assert body["pools"][0]["gaps"]["stress"]["healthy"]["first_week"] is None


def test_cost_keeps_fully_loaded_and_marginal_apart(api_for, finished):
    pool = api_for("operator").get("/api/v1/cost?days=1").json()["pools"][0]
    assert pool["fully_loaded_per_million_useful_output_tokens"]["basis"] == "fully_loaded"
    assert pool["marginal_per_million_output_tokens"]["basis"] == "marginal"
    assert api_for("operator").get("/api/v1/cost?days=0").status_code == 400


@pytest.mark.parametrize("who", ["member", "teammate", "outsider", "approver", "gateway"])
def test_only_operators_start_runs(api_for, fleet, who):
    assert api_for(who).post("/api/v1/forecasts/runs", {}, format="json").status_code == 403
    assert ForecastRun.objects.count() == 0


def test_an_operator_starts_a_run(api_for, fleet, monkeypatch, django_capture_on_commit_callbacks):
    from forecasting import tasks

    sent = []
    monkeypatch.setattr(tasks.run_forecast, "delay", lambda run_id: sent.append(run_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = api_for("operator").post("/api/v1/forecasts/runs", {"parameters": {"spike_pct": 35}}, format="json")
    assert response.status_code == 202
    run = ForecastRun.objects.get()
    assert sent == [str(run.id)]  # handed to a worker only after the row committed
    assert (response.json()["id"], run.status, run.parameters["spike_pct"]) == (str(run.id), "queued", 35.0)
    bad = api_for("operator").post("/api/v1/forecasts/runs", {"parameters": {"n_jobs": 9}}, format="json")
    assert bad.status_code == 400
    assert ForecastRun.objects.count() == 1


def test_run_status_is_readable_by_staff(api_for, finished):
    assert api_for("approver").get(f"/api/v1/forecasts/runs/{finished.id}").json()["status"] == "succeeded"
    assert api_for("member").get(f"/api/v1/forecasts/runs/{finished.id}").status_code == 403
