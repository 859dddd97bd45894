import pytest

from portal.services.conversion import replicas_for, scenario_cu


def test_rps_scenario_uses_p50_shape_and_weights():
    # 10 req/s × (1000 + 4 × 200) = 18,000 wt/s; R 1000 → 18 CU
    assert (
        scenario_cu(basis="rps", value=10, prompt_p50=1000, output_p50=200, w_out=4, w_cached=0, r_wt_per_s=1000)
        == 18.0
    )


def test_wt_per_min_scenario_ignores_shape():
    # 3,000,000 wt/min = 50,000 wt/s → 50 CU
    assert (
        scenario_cu(
            basis="wt_per_min", value=3_000_000, prompt_p50=1, output_p50=1, w_out=4, w_cached=0, r_wt_per_s=1000
        )
        == 50.0
    )


def test_negative_rate_refused():
    with pytest.raises(ValueError):
        scenario_cu(basis="rps", value=-1, prompt_p50=1, output_p50=1, w_out=4, w_cached=0, r_wt_per_s=1000)


def test_replicas_are_whole_and_ceil():
    assert replicas_for(140.0, 70.0) == 2
    assert replicas_for(140.001, 70.0) == 3
    assert replicas_for(0, 70.0) == 0
