"""Issue 15.3 through the catalogue and the API: the published compute specs land in the catalogue,
and the sizing answer carries `warnings: [{code, message, share}]`."""

from __future__ import annotations

from entitlements.compute_specs import load_compute_specs
from entitlements.models import ServedModel
from tests.factories import AcceleratorFactory, OperatingPointFactory, ServedModelFactory
from tests.sizing.conftest import sizing_body

URL = "/api/v1/sizing"


def test_the_csv_figures_fill_the_catalogue_and_bind_prefill(db, api):
    model = ServedModelFactory(slug="llama-2-70b", context_length=4096)
    acc = AcceleratorFactory(slug="h100-80gb", cloud_on_demand_per_hour=2.0)
    tpu = AcceleratorFactory(slug="tpu-v5e-8", chips_per_slice=8, memory_gb=16)
    OperatingPointFactory(model=model, accelerator=acc)
    assert load_compute_specs() == 3
    model.refresh_from_db()
    acc.refresh_from_db()
    tpu.refresh_from_db()
    assert (model.active_params_b, acc.dense_tflops_per_chip, tpu.dense_tflops_per_chip) == (69.0, 989.0, 197.0)

    # Bound per 8-GPU replica: 8 × 989e12 × 0.5 ÷ (2 × 69e9) = 28,666.67 prompt tokens/s. 10 req/s × 3,000
    # prompt tokens = 30,000/s → ⌈30,000 ÷ (28,666.67 × 0.7)⌉ = 2 replicas; weighted tokens need only 1
    # (30,000 + 4 × 10 × 10 = 30,400 wt/s ÷ (70,000 × 0.7)).
    body = sizing_body(
        model="llama-2-70b",
        arrival_rate_rps=10,
        prompt_tokens={"mean": 3000, "p50": 3000, "p95": 3000, "p99": 3000},
        output_tokens={"mean": 10, "p50": 10, "p95": 10, "p99": 10},
        failure_policy="none",
    )
    d = api("member").post(URL, body, format="json").json()
    assert d["replicas"]["for_load"] == 1
    assert d["replicas"]["steady"] == 2
    assert [w["code"] for w in d["warnings"]] == ["PREFILL_BOUND"]


def test_context_exceeded_through_the_api(catalogue, api):
    # With llama-test's context at 8,192: 3 of 10 paired requests (8,000 + 200, 9,000 + 100 twice) exceed it.
    ServedModel.objects.filter(slug="llama-test").update(context_length=8192)
    prompts = [1000] * 6 + [8000, 8000, 9000, 9000]
    outputs = [100] * 6 + [100, 200, 100, 100]
    body = sizing_body(prompt_tokens={"samples": prompts}, output_tokens={"samples": outputs})
    d = api("member").post(URL, body, format="json").json()
    assert [(w["code"], w["share"]) for w in d["warnings"]] == [("CONTEXT_EXCEEDED", 0.3)]
