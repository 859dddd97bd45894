"""Issue 30 on the sizing API: the CU to buy with its check, replayed independently; KV at the
trace's own timing never above its maximum concurrent KV; cost per useful token at the real volume."""

from __future__ import annotations

import numpy as np
import pytest

from telemetry.trace_import import trace_import
from tests.capacity.test_planning import independent_share
from tests.sizing.conftest import sizing_body
from tests.sizing.test_rate_basis import URL, _trace_body, burst_arrivals, burst_csv

R, W_OUT = 1000.0, 4.0
CONTRACT_FIELDS = {"cu_to_buy", "target_throttled_share", "replay", "replay_one_step_less", "planning_basis"}


@pytest.fixture
def burst_trace(catalogue, people):
    return trace_import(data=burst_csv(), name="burst", tenant=people["member"].membership.tenant)


def test_a_trace_answers_the_cu_its_own_timing_needs(api, burst_trace):
    body = _trace_body(burst_trace)
    body.pop("arrival_rate_rps")
    d = api("member").post(URL, body, format="json").json()
    assert d.keys() >= CONTRACT_FIELDS
    t, cost = burst_arrivals(), np.full(4140, 300 + W_OUT * 100)
    cu = d["cu_to_buy"]
    assert d["replay"] == {"cu": cu, "throttled_share": independent_share(t, cost, cu), "requests": 4140}
    assert independent_share(t, cost, cu) <= 0.001 < independent_share(t, cost, round(cu - 0.1, 1))
    assert d["replay_one_step_less"]["throttled_share"] == independent_share(t, cost, round(cu - 0.1, 1))
    # The 600-request burst minute needs less than its 7 CU peak: the full bucket absorbs part of it.
    assert cu == 3.5
    assert d["check"].startswith(f"{cu:.1f} CU: replayed 4,140 requests")
    assert "own arrival times" in d["planning_basis"]


def test_a_larger_target_never_asks_more_through_the_api(api, burst_trace):
    body = _trace_body(burst_trace)
    body.pop("arrival_rate_rps")
    strict = api("member").post(URL, {**body, "target_throttled_share": 0.0001}, format="json").json()
    loose = api("member").post(URL, {**body, "target_throttled_share": 0.2}, format="json").json()
    assert loose["cu_to_buy"] < strict["cu_to_buy"]
    assert loose["target_throttled_share"] == 0.2


@pytest.mark.parametrize("bad", [0, 0.00009, 0.6, "0.1", True, None])
def test_a_target_out_of_range_is_a_400_naming_it(catalogue, api, bad):
    r = api("member").post(URL, sizing_body(target_throttled_share=bad), format="json")
    if bad is None:
        assert r.status_code == 200  # left out: the class default
        assert r.json()["target_throttled_share"] == 0.001
        return
    assert r.status_code == 400
    assert "target_throttled_share" in r.json()["error"]["fields"]


def test_an_envelope_states_its_burstiness_and_the_parameter_moves_the_answer(catalogue, api):
    steady = api("member").post(URL, sizing_body(minute_rate_cv=0), format="json").json()
    bursty = api("member").post(URL, sizing_body(minute_rate_cv=1.0), format="json").json()
    assert "coefficient of variation 0 " in steady["planning_basis"]
    assert "coefficient of variation 1 " in bursty["planning_basis"]
    # 100 req/s × 700 wt = 70 CU at the mean; a steady hour needs about that (a little less: the
    # bucket starts full, 60 s of the hour prepaid), burstier minutes need more.
    assert 65 < steady["cu_to_buy"] < 72 < bursty["cu_to_buy"]
    assert any(a.startswith("CU to buy: ") for a in bursty["assumptions"])


def test_kv_at_the_peak_basis_never_exceeds_the_traces_own_maximum(api, burst_trace):
    body = _trace_body(burst_trace)
    body.pop("arrival_rate_rps")
    d = api("member").post(URL, body, format="json").json()
    t = burst_arrivals()
    residence = d["ttft_s"] + 100 * d["tpot_s"]
    # The trace's own concurrent KV, not on a circle: each request holds 400 tokens for its residence.
    starts, ends = t, t + residence
    events = np.concatenate((starts, ends))
    deltas = np.concatenate((np.full(len(t), 400.0), np.full(len(t), -400.0)))
    order = np.lexsort((deltas, events))
    own_max = float(np.cumsum(deltas[order]).max())
    assert d["kv_tokens_p99"] <= own_max
    assert d["kv_simulation"]["kv_tokens_p99"] <= own_max


def test_cost_per_useful_token_is_over_the_real_volume_and_the_peaks_extra_apart(api, burst_trace):
    body = _trace_body(burst_trace)
    body.pop("arrival_rate_rps")
    peak = api("member").post(URL, body, format="json").json()
    mean = api("member").post(URL, {**body, "arrival_rate_basis": "mean"}, format="json").json()
    cost = peak["cost"]
    # Sized for the busy minute (10 req/s) but producing the mean's tokens: the same useful tokens
    # per hour as sizing at the mean, from a costlier fleet.
    assert cost["useful_output_tokens_per_hour"] == pytest.approx(
        mean["cost"]["useful_output_tokens_per_hour"], rel=1e-12
    )
    assert cost["useful_output_tokens_per_hour"] == pytest.approx(4140 / 3599 * 100 * 3600 * 0.99, rel=1e-12)
    assert cost["per_million_useful_output_tokens"] == pytest.approx(
        cost["per_hour"] / (cost["useful_output_tokens_per_hour"] / 1e6), rel=1e-12
    )
    assert cost["peak_extra_per_hour"] == pytest.approx(cost["per_hour"] - mean["cost"]["per_hour"], rel=1e-12)
    assert mean["cost"]["peak_extra_per_hour"] == 0.0


def test_the_calculator_shows_the_cu_to_buy_with_its_check(people, burst_trace):
    from tests.clients import web_client
    from tests.sizing.test_page import FORM, HTMX

    form = {**FORM, "lengths": "trace", "trace": str(burst_trace.pk), "arrival_rate_basis": "peak_1m"}
    html = web_client(people["member"]).get("/sizing/", form, **HTMX).content.decode()
    assert 'id="cu-to-buy"' in html
    check = html.split('id="cu-check">')[1].split("</small>")[0]
    assert "CU: replayed 4,140 requests" in check and "(target 0.1 %); at " in check


def test_an_envelopes_cv_defaults_by_workload_kind_and_names_its_source(catalogue, api):
    """Issue 45.3: no CV stated, the catalogue's for the kind (conversation unless named), with its source."""
    plain = api("member").post(URL, sizing_body(), format="json").json()
    coding = api("member").post(URL, sizing_body(workload_kind="coding"), format="json").json()
    stated = api("member").post(URL, sizing_body(workload_kind="coding", minute_rate_cv=0.5), format="json").json()
    assert (plain["minute_rate_cv"], coding["minute_rate_cv"], stated["minute_rate_cv"]) == (0.21, 1.04, 0.5)
    assert "Azure LLM inference trace 2023, conversation" in plain["cv_source"]
    assert "Azure LLM inference trace 2023, code" in coding["cv_source"] and stated["cv_source"] == "stated"
    assert coding["cu_to_buy"] > plain["cu_to_buy"]  # burstier minutes need more
    assert "coefficient of variation 1.04" in coding["planning_basis"]


@pytest.mark.parametrize("bad", ["chat", 3, ""])
def test_an_unknown_workload_kind_is_a_400_naming_it(catalogue, api, bad):
    r = api("member").post(URL, sizing_body(workload_kind=bad), format="json")
    assert r.status_code == 400 and "workload_kind" in r.json()["error"]["fields"]
