"""capacity.lengths: the quantile function behind stated p50/p95/p99, and validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.input_errors import SizingInputError
from capacity.lengths import (
    Z95,
    Z99,
    LengthQuantiles,
    LengthSamples,
    cycled_indices,
    draw_lengths,
    normal_ppf,
    quantile_lengths,
    spec_mean,
    stratified_uniform,
    validate_length,
)


def test_normal_ppf_known_values():
    u = np.array([0.001, 0.025, 0.5, 0.8413447460685429, 0.975, 0.999])
    expected = [-3.090232306167813, -1.959963984540054, 0.0, 1.0, 1.959963984540054, 3.090232306167813]
    assert normal_ppf(u).tolist() == pytest.approx(expected, abs=1e-8)
    assert pytest.approx(1.6448536269514722, abs=1e-8) == Z95
    assert pytest.approx(2.3263478740408408, abs=1e-8) == Z99


def test_quantile_function_passes_through_the_stated_quantiles():
    spec = LengthQuantiles(mean=300, p50=200, p95=800, p99=1500)
    q = quantile_lengths(spec, np.array([0.0, 0.25, 0.5, 0.95, 0.99, 0.999]))
    # below the median: linear 0 → p50, so u = 0.25 gives 100; above p99: held at p99
    assert q.tolist() == pytest.approx([0.0, 100.0, 200.0, 800.0, 1500.0, 1500.0], rel=1e-12)


def test_quantile_function_between_anchors_is_lognormal():
    # u with z = Z95 / 2 sits halfway in log space: √(200 × 800) = 400
    spec = LengthQuantiles(mean=300, p50=200, p95=800, p99=1500)
    u = float(np.interp(Z95 / 2, normal_ppf(np.linspace(0.5, 0.95, 200001)), np.linspace(0.5, 0.95, 200001)))
    assert quantile_lengths(spec, np.array([u]))[0] == pytest.approx(400.0, rel=1e-6)


def test_flat_spec_gives_a_point_mass_above_the_median():
    spec = LengthQuantiles(mean=100, p50=100, p95=100, p99=100)
    q = quantile_lengths(spec, np.linspace(0.5, 0.999, 50))
    assert q.tolist() == pytest.approx([100.0] * 50, rel=1e-14)
    assert set(draw_lengths(spec, np.linspace(0.5, 0.999, 50), np.empty(0, dtype=np.intp)).tolist()) == {100.0}


quantile_specs = st.tuples(st.floats(1, 1e4), st.floats(1, 10), st.floats(1, 10), st.floats(1, 1e4)).map(
    lambda t: LengthQuantiles(mean=t[3], p50=t[0], p95=t[0] * t[1], p99=t[0] * t[1] * t[2])
)


@given(spec=quantile_specs, bump=st.floats(1, 3), which=st.sampled_from(["p50", "p95", "p99", "all"]))
def test_quantile_function_never_falls_when_a_stated_quantile_grows(spec, bump, which):
    if which == "all":
        bigger = LengthQuantiles(spec.mean * bump, spec.p50 * bump, spec.p95 * bump, spec.p99 * bump)
    elif which == "p50":
        bigger = LengthQuantiles(spec.mean, min(spec.p50 * bump, spec.p95), spec.p95, spec.p99)
    elif which == "p95":
        bigger = LengthQuantiles(spec.mean, spec.p50, min(spec.p95 * bump, spec.p99), spec.p99)
    else:
        bigger = LengthQuantiles(spec.mean, spec.p50, spec.p95, spec.p99 * bump)
    u = np.linspace(0.0005, 0.9995, 400)
    lo, hi = quantile_lengths(spec, u), quantile_lengths(bigger, u)
    assert bool(np.all(hi >= lo * (1 - 1e-12)))


@given(spec=quantile_specs)
def test_quantile_function_is_non_decreasing_in_u(spec):
    q = quantile_lengths(spec, np.linspace(0, 0.9999, 1000))
    assert bool(np.all(np.diff(q) >= -1e-9 * spec.p99))


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (LengthQuantiles(mean=10, p50=20, p95=15, p99=30), "prompt_tokens.p50"),
        (LengthQuantiles(mean=10, p50=10, p95=40, p99=30), "prompt_tokens.p95"),
        (LengthQuantiles(mean=-1, p50=10, p95=20, p99=30), "prompt_tokens.mean"),
        (LengthQuantiles(mean=10, p50=0, p95=20, p99=30), "prompt_tokens.p50"),
        (LengthQuantiles(mean=10, p50=10, p95=20, p99=float("nan")), "prompt_tokens.p99"),
        (LengthSamples.of([]), "prompt_tokens.samples"),
        (LengthSamples.of([3, -1]), "prompt_tokens.samples"),
        (LengthSamples.of([0, 0]), "prompt_tokens.samples"),
    ],
)
def test_validation_names_the_field(spec, field):
    with pytest.raises(SizingInputError) as e:
        validate_length(spec, "prompt_tokens")
    assert e.value.field == field


def test_p50_above_p99_names_p50():
    with pytest.raises(SizingInputError) as e:
        validate_length(LengthQuantiles(mean=10, p50=50, p95=60, p99=40), "output_tokens")
    # p50 ≤ p95 holds, so the first broken order is p95 > p99
    assert e.value.field == "output_tokens.p95"
    with pytest.raises(SizingInputError) as e:
        validate_length(LengthQuantiles(mean=10, p50=50, p95=40, p99=40), "output_tokens")
    assert e.value.field == "output_tokens.p50"
    assert e.value.message == "p50 (50) must be ≤ p95 (40)"


def test_spec_mean():
    assert spec_mean(LengthSamples.of([1, 2, 3, 6])) == 3.0
    assert spec_mean(LengthQuantiles(mean=7.5, p50=5, p95=10, p99=20)) == 7.5


def test_stratified_uniform_has_one_draw_per_slice():
    u = stratified_uniform(np.random.default_rng(1), 1000)
    assert sorted(np.floor(u * 1000).astype(int).tolist()) == list(range(1000))


def test_cycled_indices_use_every_sample_once_per_cycle():
    idx = cycled_indices(np.random.default_rng(1), 7, 23)
    assert len(idx) == 23
    for c in range(3):
        assert sorted(idx[c * 7 : (c + 1) * 7].tolist()) == list(range(7))
