"""Sizing's latency fields (docs/latency.md) through POST /api/v1/sizing and the calculator page."""

from __future__ import annotations

import pytest

from capacity.latency_curve import MeasuredPoint, fit
from tests.factories import AcceleratorFactory, OperatingPointFactory
from tests.figures import figures
from tests.sizing.conftest import sizing_body
from tests.sizing.test_page import FORM, HTMX

URL = "/api/v1/sizing"
SERVER = MeasuredPoint("Server", 10_000.0, 0.8, 0.12)
INTERACTIVE = MeasuredPoint("Interactive", 6_000.0, 0.3, 0.04)
OFFLINE = MeasuredPoint("Offline", 10_500.0, is_ceiling=True)


@pytest.fixture
def measured(db):
    """One pair with Server, Interactive and Offline points (mix 300/100: 7 wt per output token)."""
    acc = AcceleratorFactory(cloud_on_demand_per_hour=2.0, cloud_reserved_per_hour=1.5, min_billing_minutes=1)
    common = {"accelerator": acc, "runtime": "rt"}
    OperatingPointFactory(**common, scenario="Server", measured_ttft_p99_ms=800, measured_tpot_p99_ms=120)
    OperatingPointFactory(
        **common,
        scenario="Interactive",
        out_tps_per_replica=6_000,
        ttft_p99_limit_ms=450,
        tpot_p99_limit_ms=40,
        measured_ttft_p99_ms=300,
        measured_tpot_p99_ms=40,
    )
    OperatingPointFactory(
        **common,
        scenario="Offline",
        out_tps_per_replica=10_500,
        is_ceiling=True,
        ttft_p99_limit_ms=None,
        tpot_p99_limit_ms=None,
    )
    return acc


def test_the_answer_carries_the_curve_and_the_breaking_rate_of_its_own_simulation(measured, api):
    d = api("member").post(URL, sizing_body(), format="json").json()

    curve = fit([SERVER, INTERACTIVE, OFFLINE])
    assert d["latency_curve"]["model"] == "step-queue"
    assert d["latency_curve"]["parameters"] == pytest.approx(curve.parameters(), rel=1e-9)
    assert [p["out_tps_per_replica"] for p in d["latency_curve"]["points"]] == [10_000, 6_000, 10_500]
    assert d["latency_curve"]["borrowed"] == []
    assert set(d["latency_at_planning_rate"]) == {"ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"}
    assert 0 <= d["slo_attainment"] <= 1
    # One truth: the breaking rate is the highest simulated rate meeting the SLO, every simulated rate
    # that misses it lies above it, and the first miss is within the search's resolution.
    brk, lu = d["slo_breaking_rate_rps"], d["latency_under_load"]
    sims = lu["series"]["sim"]
    assert any(s["rate_rps"] == pytest.approx(brk) and s["meets_slo"] for s in sims)
    assert all(s["rate_rps"] > brk for s in sims if not s["meets_slo"])
    for s in sims:
        over = s["ttft_p99_s"] > 2.0 or s["tpot_p99_s"] > 0.2
        assert over == (not s["meets_slo"])
    assert lu["breaks"]["first_miss_rate_rps"] <= brk * 1.25
    assert lu["breaks"]["half"] in {"TTFT", "TPOT"} and lu["breaks"]["bound"] in {"prefill-bound", "decode-bound"}


def test_one_replica_more_never_raises_a_simulated_p99_and_one_less_never_lowers_it(measured, api):
    d = api("member").post(URL, sizing_body(arrival_rate_rps=400), format="json").json()
    n, at = d["replicas"]["steady"], d["latency_at_planning_rate"]
    by_n = {nb["replicas"]: nb for nb in d["latency_under_load"]["neighbours"]}
    for k in at:
        assert by_n[n + 1][k] <= at[k]
        if n > 1:
            assert by_n[n - 1][k] >= at[k]


def test_the_slo_fleet_is_the_fewest_replicas_the_simulation_meets_the_slo_with(measured, api):
    d = api("member").post(URL, sizing_body(arrival_rate_rps=400), format="json").json()
    f = d["latency_under_load"]["slo_fleet"]
    assert f["replicas"] >= d["replicas"]["for_kv"]
    check = f["check"]
    assert check["replicas"] == f["replicas"] and check["rate_rps"] == pytest.approx(400)
    assert check["ttft_p99_s"] <= 2.0 and check["tpot_p99_s"] <= 0.2 and check["meets_slo"]
    if f["replicas"] > max(1, f["for_kv"]):
        assert not f["one_less"]["meets_slo"]  # the check shown: one replica less misses
    assert f["cost_per_hour"] == pytest.approx(f["replicas"] * f["cost_per_replica_hour"])


def test_more_load_never_lowers_the_answers_predicted_p99(measured, api):
    lows = api("member").post(URL, sizing_body(arrival_rate_rps=100), format="json").json()
    series = lows["latency_under_load"]["series"]
    finite = [t for t in series["tpot_p99_s"] if t is not None]
    assert finite == sorted(finite) and len(finite) > 10
    ttft = [t for t in series["ttft_p99_s"] if t is not None]
    assert ttft == sorted(ttft)
    sims = series["sim"]  # the simulation's own points, low rate to high
    assert [s["rate_rps"] for s in sims] == sorted(s["rate_rps"] for s in sims) and len(sims) >= 4
    for k in ("ttft_p99_s", "tpot_p99_s", "ttft_p50_s", "tpot_p50_s"):
        assert [s[k] for s in sims] == sorted(s[k] for s in sims), k


def test_a_pair_without_measured_p99s_has_no_curve_and_says_why(catalogue, api):
    d = api("member").post(URL, sizing_body(), format="json").json()
    assert d["latency_curve"] is None and d["slo_breaking_rate_rps"] is None
    assert "no measured TTFT and TPOT p99" in d["latency_under_load"]["unavailable"]


def test_a_one_point_pair_borrows_from_the_same_accelerator_and_the_page_says_so(measured, browser_client):
    OperatingPointFactory(
        accelerator=measured,
        runtime="other",
        out_tps_per_replica=20_000,
        measured_ttft_p99_ms=900,
        measured_tpot_p99_ms=150,
    )
    OperatingPointFactory(
        accelerator=measured,
        runtime="other",
        scenario="Offline",
        out_tps_per_replica=21_000,
        is_ceiling=True,
        ttft_p99_limit_ms=None,
        tpot_p99_limit_ms=None,
    )
    # The other runtime's point carries twice as much, so it is the cheapest and sized on; it has one
    # latency point, so it borrows the shape of "rt" on the same accelerator.
    html = browser_client.get("/sizing/", FORM, **HTMX).content.decode()
    assert 'id="latency-borrowed"' in html
    assert "shape borrowed" in html and "llama-test on 8× h100-test, rt" in html
    assert "latency-chart" in figures(html)


def test_the_calculator_shows_the_chart_the_breaking_rate_and_the_advice(measured, browser_client):
    html = browser_client.get("/sizing/", FORM, **HTMX).content.decode()

    fig = figures(html)["latency-chart"]
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "TTFT p99 (curve)",
        "TTFT p99 (simulated)",
        "TTFT p50 (simulated)",
        "TPOT p99 (curve)",
        "TPOT p99 (simulated)",
        "TPOT p50 (simulated)",
    ]
    assert len(fig["layout"]["shapes"]) == 4  # two SLO lines, planning and breaking rate
    # The chart says where it breaks: the planning rate, the breaking rate with the half that breaks
    # first and its bound, and the simulation's own points on both panels.
    notes = [a["text"] for a in fig["layout"]["annotations"]]
    assert notes[0] == "planning rate"
    assert notes[1].startswith("SLO breaks ") and " first, " in notes[1] and notes[1].endswith("-bound")
    sims = [t for t in fig["data"] if t["name"].endswith("(simulated)")]
    assert all(len(t["x"]) >= 4 and None not in t["y"] for t in sims)
    assert "prompts take " in html and "the planning rate" in html
    assert "SLO holds up to" in html and "today's peak" in html
    assert 'id="slo-fleet-replicas"' in html and 'id="slo-fleet-check"' in html
    assert "Where it breaks:" in html and " p99 breaks first" in html and "-bound" in html
    assert "TPOT p99 = " in html and "ms ÷ (1 − x ÷" in html  # the fitted formula with its numbers


@pytest.fixture
def browser_client(people):
    from tests.clients import web_client

    return web_client(people["member"])
