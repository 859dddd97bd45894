"""The committed load sized on each pool's own operating point, through capacity.sizing."""

import pytest

from capacity.lengths import LengthQuantiles
from capacity.operating_points import Slo
from capacity.sizing import AcceleratorSpec, SizingInput, size
from entitlements.models import Region
from entitlements.sizing_specs import model_spec, point_spec
from portal.selectors import size_request
from portal.services.intake import launch_request_update

pytestmark = pytest.mark.django_db


def test_committed_fit_matches_capacity_sizing(fleet, draft):
    sizing = size_request(draft, [Region.objects.get(slug="us-test")])
    fit = {ps.pool.slug: ps.fit for ps in sizing.regions[0].pools}["pool-a"]
    pool = fleet.pool_a
    # The conftest request: 10 req/s committed, prompt 1000/4000/6000, output 200/800/2000,
    # TTFT 2 s and TPOT 0.2 s, on pool-a (2 + 2 replicas over two zones, failure policy "zone").
    expected = size(
        SizingInput(
            model=model_spec(pool.model),
            operating_points=(point_spec(pool.operating_point),),
            accelerators=(AcceleratorSpec(slug="h100-test", memory_gb=80.0),),
            arrival_rate_rps=10.0,
            prompt_tokens=LengthQuantiles(mean=1000, p50=1000, p95=4000, p99=6000),
            output_tokens=LengthQuantiles(mean=200, p50=200, p95=800, p99=2000),
            slo=Slo(ttft_p99_s=2.0, tpot_p99_s=0.2),
            failure_policy="zone",
            zones=2,
            sim_requests=5000,
        )
    )
    assert (fit.steady, fit.with_failure, fit.kv_fits, fit.error) == (
        expected.replicas.steady,
        expected.replicas.with_failure,
        expected.kv_fits,
        "",
    )
    # The zone rule with two zones doubles the steady count.
    assert fit.with_failure == 2 * fit.steady


def test_an_slo_the_pool_cannot_meet_is_named(fleet, draft, people):
    launch_request_update(actor=people.requester, request=draft, ttft_p99_ms=500)
    draft.refresh_from_db()
    sizing = size_request(draft, [Region.objects.get(slug="us-test")])
    fit = sizing.regions[0].pools[0].fit
    assert fit.steady is None
    assert fit.error.startswith("slo: no measured operating point of llama-test meets TTFT p99 ≤ 0.5 s")
