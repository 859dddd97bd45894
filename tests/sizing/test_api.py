"""POST /api/v1/sizing: exact values for a class sized by hand, the contract's rules, named 400s."""

from __future__ import annotations

import math

import pytest

from capacity.cost import CloudAccelerator, CostInputs
from capacity.sizing import (
    AcceleratorSpec,
    LengthQuantiles,
    ModelSpec,
    OperatingPoint,
    SizingInput,
    Slo,
    size,
)
from capacity.units import ReferenceMix
from tests.sizing.conftest import sizing_body

URL = "/api/v1/sizing"


def test_a_fixed_length_class_matches_the_hand_calculation(catalogue, api):
    r = api("member").post(URL, sizing_body(), format="json")

    assert r.status_code == 200
    d = r.json()
    assert d["input_tokens_per_s"] == 30_000
    assert d["uncached_input_tokens_per_s"] == 30_000
    assert d["output_tokens_per_s"] == 10_000
    # No measured p99s on the point: its limits are the latencies, 2 s + 100 × 0.2 s.
    assert d["mean_residence_s"] == pytest.approx(22.0, rel=1e-12)
    assert d["mean_concurrency"] == pytest.approx(2200.0, rel=1e-12)
    assert d["capacity_units"] == 70.0  # (30,000 + 4 × 10,000) wt/s ÷ R 1,000
    # Load: ⌈70,000 ÷ (70,000 × 0.7)⌉ = 2; KV: 2,200 in flight × 400 tokens ≪ 1,525,878 per replica.
    assert d["replicas"] == {
        "steady": 2,
        "with_failure": 3,
        "startup_reserve": 0,
        "total": 3,
        "for_load": 2,
        "for_kv": 1,
    }
    assert d["accelerators"] == 24
    assert d["cost"]["per_hour"] == 48.0  # 24 × 2.0 on demand; cloud power is in the rate
    assert d["kv_capacity_tokens_per_replica"] == 1_525_878
    assert d["kv_bytes_p99"] == d["kv_tokens_p99"] * 327_680
    assert d["operating_point_used"]["id"] == catalogue.pk
    assert d["operating_point_used"]["source"] == "https://example.org/op"
    assert d["operating_point_used"]["url"] == f"/api/v1/catalogue/operating-points/{catalogue.pk}"
    steps = {s["name"]: s["formula"] for s in d["steps"]}
    assert steps["mean concurrency"] == "2,200 = 100 req/s × 22 s"
    assert steps["replicas with failure"] == "3 = ⌈2 × 3 ÷ (3 − 1)⌉ (lose the largest zone)"


def test_the_api_gives_what_capacity_size_gives_for_the_same_inputs(catalogue, api):
    d = api("member").post(URL, sizing_body(), format="json").json()

    direct = size(
        SizingInput(
            model=ModelSpec(
                "llama-test", kv_bytes_per_token=327_680, context_length=16384, weights_gb=140, r_wt_per_s=1000
            ),
            operating_points=(OperatingPoint("op", "h100-test", 8, 10_000, ReferenceMix(300, 100), 2.0, 0.2),),
            accelerators=(
                AcceleratorSpec(
                    "h100-test",
                    80,
                    CloudAccelerator(on_demand_per_hour=2.0, reserved_per_hour=1.5, minimum_billing_hours=1 / 60),
                ),
            ),
            arrival_rate_rps=100,
            prompt_tokens=LengthQuantiles(300, 300, 300, 300),
            output_tokens=LengthQuantiles(100, 100, 100, 100),
            slo=Slo(2, 0.2),
            failure_policy="zone",
            zones=3,
            cost_inputs=CostInputs(pue=1.3, electricity_per_kwh=0.1, slo_met_fraction=0.99),
        )
    )
    assert d["kv_tokens_p99"] == direct.kv_tokens_p99
    assert d["mean_concurrency"] == direct.mean_concurrency
    assert d["replicas"] == direct.replicas.to_dict()
    assert d["cost"]["per_million_useful_output_tokens"] == direct.cost.per_million_useful_output_tokens.value
    assert d["network_bytes_per_s"] == direct.network_bytes_per_s


@pytest.mark.parametrize("zones", [2, 3, 4])
def test_zone_policy_needs_steady_times_z_over_z_minus_1_whole_replicas(catalogue, api, zones):
    d = api("member").post(URL, sizing_body(arrival_rate_rps=500, zones=zones), format="json").json()

    steady = d["replicas"]["steady"]
    assert steady == 8  # ⌈350,000 ÷ 49,000⌉
    assert d["replicas"]["with_failure"] == math.ceil(steady * zones / (zones - 1))
    assert all(isinstance(v, int) for v in d["replicas"].values())


def test_a_higher_rate_never_lowers_replicas_or_kv(catalogue, api):
    client = api("member")
    low = client.post(URL, sizing_body(arrival_rate_rps=100), format="json").json()
    high = client.post(URL, sizing_body(arrival_rate_rps=101), format="json").json()

    assert high["kv_tokens_p99"] >= low["kv_tokens_p99"]
    assert high["replicas"]["total"] >= low["replicas"]["total"]
    assert high["mean_concurrency"] > low["mean_concurrency"]


def _fields(response) -> dict:
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def test_a_negative_rate_is_a_400_naming_arrival_rate_rps(catalogue, api):
    r = api("member").post(URL, sizing_body(arrival_rate_rps=-1), format="json")
    assert list(_fields(r)) == ["arrival_rate_rps"]


def test_an_unknown_model_is_a_400_naming_model(catalogue, api):
    r = api("member").post(URL, sizing_body(model="gpt-17"), format="json")
    assert _fields(r) == {"model": ["unknown model 'gpt-17'"]}


def test_p50_above_p99_is_a_400_naming_the_quantile(catalogue, api):
    body = sizing_body(prompt_tokens={"mean": 300, "p50": 900, "p95": 400, "p99": 500})
    r = api("member").post(URL, body, format="json")
    assert _fields(r) == {"prompt_tokens.p50": ["p50 (900) must be ≤ p95 (400)"]}
    body = sizing_body(output_tokens={"mean": 100, "p50": 100, "p95": 900, "p99": 500})
    r = api("member").post(URL, body, format="json")
    assert _fields(r) == {"output_tokens.p95": ["p95 (900) must be ≤ p99 (500)"]}


def test_an_slo_no_measured_point_meets_is_a_400_naming_slo_and_never_extrapolates(catalogue, api):
    r = api("member").post(URL, sizing_body(slo={"ttft_p99_s": 0.5, "tpot_p99_s": 0.2}), format="json")
    fields = _fields(r)
    assert list(fields) == ["slo"]
    assert "no measured operating point of llama-test meets TTFT p99 ≤ 0.5 s" in fields["slo"][0]


def test_unknown_accelerator_and_unknown_keys_are_named(catalogue, api):
    client = api("member")
    assert list(_fields(client.post(URL, sizing_body(accelerator="tpu-v9"), format="json"))) == ["accelerator"]
    assert list(_fields(client.post(URL, sizing_body(arival_rate_rps=3), format="json"))) == ["arival_rate_rps"]
    assert list(_fields(client.post(URL, sizing_body(cost={"pricing": "purchased"}), format="json"))) == [
        "cost.pricing"
    ]


def test_samples_of_equal_length_size_as_a_paired_class(catalogue, api):
    body = sizing_body(prompt_tokens={"samples": [300] * 50}, output_tokens={"samples": [100] * 50})
    d = api("member").post(URL, body, format="json").json()
    assert d["input_tokens_per_s"] == 30_000
    assert (
        "lengths: prompt and output samples are paired by request (their joint distribution is kept)"
        in d["assumptions"]
    )


def test_gateway_accounts_may_not_size(catalogue, api):
    assert api("gateway").post(URL, sizing_body(), format="json").status_code == 403
