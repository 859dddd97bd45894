"""Issue 15.1: size a trace for its busy minute. A synthetic hour at 1 req/s with one minute at
10 req/s: `peak_1m` sizes at exactly 10 req/s and its CU scales with it; the default for a trace is
`peak_1m`; the calculator marks the basis on the minute-rate chart and costs every basis."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.rate_basis import minute_rates
from telemetry.trace_import import trace_import
from tests.clients import web_client
from tests.figures import figures
from tests.sizing.conftest import sizing_body
from tests.sizing.test_page import FORM, HTMX

URL = "/api/v1/sizing"
HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens"


def burst_arrivals() -> np.ndarray:
    """One request a second for an hour, except [1800, 1860): ten a second. 3,540 + 600 = 4,140."""
    calm = np.arange(3600, dtype=float)
    calm = calm[(calm < 1800) | (calm >= 1860)]
    burst = 1800 + np.arange(600) / 10
    return np.sort(np.concatenate((calm, burst)))


def burst_csv() -> bytes:
    lines = [HEADER]
    for t in burst_arrivals():
        whole = int(t)
        ticks = round((t - whole) * 10_000_000)
        m, s = divmod(whole, 60)
        lines.append(f"2023-11-16 18:{m:02d}:{s:02d}.{ticks:07d},300,100")
    return ("\n".join(lines) + "\n").encode()


def test_the_minute_rates_of_a_known_burst():
    rates = minute_rates(burst_arrivals())
    assert rates.rates["peak_1m"] == 10.0  # the 600 requests of [1800, 1860)
    assert rates.rates["mean"] == 4140 / 3599  # requests ÷ (last − first arrival)
    assert rates.step_s == 1.0
    assert len(rates.window_rates) == 3599 - 60 + 1
    # 3,421 of the 3,540 windows are calm (60 requests); the 119 starting in [1741, 1859] overlap the burst
    # and hold 9s − 15,600 (s ≤ 1800) or 16,800 − 9s requests: 69, 69, 78, 78, …, 591, 591, 600 sorted.
    # p95 (index 0.95 × 3,539 = 3,362.05) is calm; p99 (index 3,503.61) is elevated[82] = elevated[83] = 438.
    assert rates.rates["p95_1m"] == 1.0
    assert rates.rates["p99_1m"] == pytest.approx(438 / 60, rel=1e-12)


@pytest.fixture
def burst_trace(catalogue, people):
    return trace_import(data=burst_csv(), name="burst", tenant=people["member"].membership.tenant)


def _trace_body(trace, **over):
    return sizing_body(prompt_tokens={"trace": str(trace.pk)}, output_tokens={"trace": str(trace.pk)}, **over)


def test_a_trace_sizes_at_its_peak_minute_by_default_and_cu_scales_with_it(api, burst_trace):
    body = _trace_body(burst_trace)
    body.pop("arrival_rate_rps")
    peak = api("member").post(URL, body, format="json").json()
    mean = api("member").post(URL, {**body, "arrival_rate_basis": "mean"}, format="json").json()

    assert (peak["arrival_rate_basis"], peak["arrival_rate_used_rps"]) == ("peak_1m", 10.0)
    assert (mean["arrival_rate_basis"], mean["arrival_rate_used_rps"]) == ("mean", 4140 / 3599)
    # 300 prompt + 4 × 100 output = 700 wt per request; R = 1,000 → 7 CU at 10 req/s.
    assert peak["capacity_units"] == pytest.approx(7.0, rel=1e-12)
    assert peak["capacity_units"] / mean["capacity_units"] == pytest.approx(10.0 / (4140 / 3599), rel=1e-12)
    # Issue 30: KV comes from the trace at its own timing whatever the basis (the burst is counted once).
    assert peak["kv_tokens_p99"] == mean["kv_tokens_p99"]
    assert peak["assumptions"][0].startswith("arrival rate: its busiest minute, 10 req/s (basis peak_1m")


def test_an_explicit_rate_is_the_explicit_basis(api, burst_trace):
    d = api("member").post(URL, _trace_body(burst_trace, arrival_rate_rps=3), format="json").json()
    assert (d["arrival_rate_basis"], d["arrival_rate_used_rps"]) == ("explicit", 3)


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"arrival_rate_basis": "peak_1m"}, "give arrival_rate_rps or arrival_rate_basis, not both"),
        ({"arrival_rate_basis": "p50_1m", "arrival_rate_rps": None}, "expected one of mean, p95_1m, p99_1m, peak_1m"),
    ],
)
def test_a_bad_basis_is_a_400_naming_it(api, burst_trace, over, message):
    body = {k: v for k, v in _trace_body(burst_trace, **over).items() if v is not None}
    r = api("member").post(URL, body, format="json")
    assert r.status_code == 400
    assert r.json()["error"]["fields"]["arrival_rate_basis"][0].startswith(message)


def test_a_basis_without_a_trace_is_a_400(catalogue, api):
    body = sizing_body(arrival_rate_basis="peak_1m")
    body.pop("arrival_rate_rps")
    r = api("member").post(URL, body, format="json")
    assert r.json()["error"]["fields"] == {
        "arrival_rate_basis": ["needs both lengths from one trace (its arrival times)"]
    }


def test_the_calculator_marks_the_basis_and_costs_every_basis(people, burst_trace):
    form = {**FORM, "lengths": "trace", "trace": str(burst_trace.pk), "arrival_rate_basis": "p99_1m"}
    html = web_client(people["member"]).get("/sizing/", form, **HTMX).content.decode()
    assert {"rate-chart", "basis-cost-chart"} <= figures(html).keys()
    assert "(basis <strong>p99_1m</strong>)" in html
    for basis in ("mean", "p95_1m", "p99_1m", "peak_1m"):
        assert f"{basis} " in html.split('id="rate-basis"')[1].split("</p>")[0]
