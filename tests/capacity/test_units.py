"""capacity.units: weighted tokens and the operating-point → CU conversion (docs/contract.md §1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.units import (
    ReferenceMix,
    TokenWeights,
    cu_to_wt_per_s,
    explain_goodput,
    replica_goodput_cu,
    replica_goodput_wt_per_s,
    weighted_tokens,
    wt_per_s_to_cu,
)

counts = st.floats(min_value=0, max_value=1e7, allow_nan=False)


def test_weighted_tokens_default_weights():
    # 1,000 prompt of which 400 cached, 200 output, w_out 4, w_cached 0:
    # 600 uncached + 0 × 400 + 4 × 200 = 1,400
    assert weighted_tokens(prompt=1000, cached_prompt=400, output=200, weights=TokenWeights()) == 1400


def test_weighted_tokens_custom_weights():
    # 600 + 0.25 × 400 + 3 × 200 = 600 + 100 + 600 = 1,300
    w = TokenWeights(w_out=3, w_cached=0.25)
    assert weighted_tokens(prompt=1000, cached_prompt=400, output=200, weights=w) == 1300


@pytest.mark.parametrize(
    ("prompt", "cached", "output", "message"),
    [
        (-1, 0, 0, "non-negative"),
        (10, 11, 0, "cannot exceed"),
        (10, 0, -5, "non-negative"),
    ],
)
def test_weighted_tokens_rejects_bad_counts(prompt, cached, output, message):
    with pytest.raises(ValueError, match=message):
        weighted_tokens(prompt=prompt, cached_prompt=cached, output=output, weights=TokenWeights())


def test_token_weights_reject_negative():
    with pytest.raises(ValueError, match="non-negative"):
        TokenWeights(w_out=-1)


def test_reference_mix_validates():
    with pytest.raises(ValueError, match="mean_output must be positive"):
        ReferenceMix(mean_prompt=100, mean_output=0)
    with pytest.raises(ValueError, match="mean_prompt must be non-negative"):
        ReferenceMix(mean_prompt=-1, mean_output=10)


def test_goodput_matches_contract_formula():
    # 34,029.38 tok/s × (4 + 684 / 283) = 34,029.38 × 6.416961130742049 = 218,365.2088
    mix = ReferenceMix(mean_prompt=684, mean_output=283)
    wt = replica_goodput_wt_per_s(out_tps_at_slo=34029.38, mix=mix, w_out=4)
    assert wt == pytest.approx(34029.38 * (4 + 684 / 283))
    assert wt == pytest.approx(218365.2088, rel=1e-9)
    # ÷ R 2,000 wt/s = 109.1826 CU
    assert replica_goodput_cu(out_tps_at_slo=34029.38, mix=mix, w_out=4, r_wt_per_s=2000) == pytest.approx(
        109.1826044, rel=1e-9
    )


def test_goodput_round_numbers():
    # 1,000 × (4 + 1,000 / 250) = 8,000 wt/s; ÷ 1,000 = 8 CU
    mix = ReferenceMix(mean_prompt=1000, mean_output=250)
    assert replica_goodput_wt_per_s(out_tps_at_slo=1000, mix=mix, w_out=4) == 8000
    assert replica_goodput_cu(out_tps_at_slo=1000, mix=mix, w_out=4, r_wt_per_s=1000) == 8


def test_explain_goodput_shows_the_arithmetic():
    mix = ReferenceMix(mean_prompt=1000, mean_output=250)
    text = explain_goodput(out_tps_at_slo=1000, mix=mix, w_out=4, r_wt_per_s=1000)
    assert text == "8.00 CU per replica = 1,000 output tok/s × (4 + 1,000 / 250 prompt per output token) ÷ R 1,000 wt/s"


def test_goodput_rejects_bad_inputs():
    mix = ReferenceMix(mean_prompt=1, mean_output=1)
    with pytest.raises(ValueError, match="out_tps_at_slo"):
        replica_goodput_wt_per_s(out_tps_at_slo=-1, mix=mix, w_out=4)
    with pytest.raises(ValueError, match="R must be positive"):
        replica_goodput_cu(out_tps_at_slo=1, mix=mix, w_out=4, r_wt_per_s=0)
    with pytest.raises(ValueError, match="R must be positive"):
        wt_per_s_to_cu(1, 0)


def test_cu_conversions_exact():
    assert cu_to_wt_per_s(2.5, 1000) == 2500
    assert wt_per_s_to_cu(2500, 1000) == 2.5


@given(cu=st.floats(min_value=0, max_value=1e6), r=st.floats(min_value=1e-3, max_value=1e6))
def test_cu_round_trip(cu, r):
    assert wt_per_s_to_cu(cu_to_wt_per_s(cu, r), r) == pytest.approx(cu, rel=1e-12, abs=1e-12)


@given(prompt=counts, share=st.floats(0, 1), output=counts, extra=st.floats(0, 1e6))
def test_weighted_tokens_monotone_in_output(prompt, share, output, extra):
    w = TokenWeights()
    cached = prompt * share
    base = weighted_tokens(prompt=prompt, cached_prompt=cached, output=output, weights=w)
    more = weighted_tokens(prompt=prompt, cached_prompt=cached, output=output + extra, weights=w)
    assert more - base == pytest.approx(4 * extra, rel=1e-9, abs=1e-6)


@given(prompt=counts, share=st.floats(0, 1), output=counts)
def test_caching_never_raises_weight_with_default_weights(prompt, share, output):
    w = TokenWeights()
    uncached = weighted_tokens(prompt=prompt, cached_prompt=0, output=output, weights=w)
    cached = weighted_tokens(prompt=prompt, cached_prompt=prompt * share, output=output, weights=w)
    assert uncached - cached == pytest.approx(prompt * share, rel=1e-9, abs=1e-6)
