"""Hypothesis properties of sizing (docs/contract.md §3): monotone in load and length, Little's law, the zone
rule, whole replicas. Same seed throughout, so two sizings see the same simulated requests."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from capacity.sizing import LengthQuantiles, LengthSamples, SizingResult, size
from tests.capacity.test_sizing import make_input

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

MONOTONE = (
    "input_tokens_per_s",
    "uncached_input_tokens_per_s",
    "output_tokens_per_s",
    "mean_residence_s",
    "mean_concurrency",
    "kv_tokens_p99",
    "kv_bytes_p99",
    "network_bytes_per_s",
    "capacity_units",
    "accelerators",
)
REPLICAS = ("steady", "with_failure", "startup_reserve", "total", "for_load", "for_kv")
SIMULATED = ("kv_tokens_p50", "kv_tokens_p99", "kv_tokens_max", "concurrency_p99")


def assert_not_lower(small: SizingResult, big: SizingResult) -> None:
    for f in MONOTONE:
        assert getattr(big, f) >= getattr(small, f), f
    for f in REPLICAS:
        assert getattr(big.replicas, f) >= getattr(small.replicas, f), f
    for f in SIMULATED:
        assert getattr(big.kv, f) >= getattr(small.kv, f), f


quantiles = st.tuples(st.floats(1, 5000), st.floats(1, 6), st.floats(1, 4), st.floats(0.5, 3)).map(
    lambda t: LengthQuantiles(mean=max(1.0, t[0] * t[3]), p50=t[0], p95=t[0] * t[1], p99=t[0] * t[1] * t[2])
)
classes = st.fixed_dictionaries(
    {
        "prompt_tokens": quantiles,
        "output_tokens": quantiles,
        "cache_hit_ratio": st.floats(0, 1),
        "cancellation_ratio": st.floats(0, 1),
        "utilization_target": st.floats(0.1, 1),
        "lb_unevenness": st.floats(1, 2),
        "failure_policy": st.sampled_from(["none", "zone", "replica:1", "fraction:0.2"]),
        "zones": st.integers(2, 5),
        "startup_minutes": st.floats(0, 20),
        "ramp_rps_per_minute": st.floats(0, 5),
        "seed": st.integers(0, 2**16),
        "sim_requests": st.integers(50, 1500),
    }
)


@FAST
@given(kw=classes, rate=st.one_of(st.just(0.0), st.floats(1e-6, 200)), factor=st.floats(1, 10))
def test_higher_rate_never_lowers_anything(kw, rate, factor):
    small = size(make_input(arrival_rate_rps=rate, **kw))
    big = size(make_input(arrival_rate_rps=rate * factor, **kw))
    assert_not_lower(small, big)


@FAST
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(2, 600),
    rate=st.floats(0.1, 50),
    factor=st.floats(1, 10),
    c=st.floats(0, 1),
)
def test_higher_rate_never_lowers_anything_on_a_replayed_trace(seed, n, rate, factor, c):
    rng = np.random.default_rng(seed)
    kw = {
        "arrival_times_s": np.sort(rng.uniform(0, 600, n)),
        "prompt_tokens": LengthSamples.of(rng.integers(1, 8000, n)),
        "output_tokens": LengthSamples.of(rng.integers(1, 1000, n)),
        "cancellation_ratio": c,
    }
    assert_not_lower(
        size(make_input(arrival_rate_rps=rate, **kw)), size(make_input(arrival_rate_rps=rate * factor, **kw))
    )


def grow(spec: LengthQuantiles, which: str, k: float) -> LengthQuantiles:
    if which == "all":
        return LengthQuantiles(spec.mean * k, spec.p50 * k, spec.p95 * k, spec.p99 * k)
    if which == "mean":
        return replace(spec, mean=spec.mean * k)
    if which == "p50":
        return replace(spec, p50=min(spec.p50 * k, spec.p95))
    if which == "p95":
        return replace(spec, p95=min(spec.p95 * k, spec.p99))
    return replace(spec, p99=spec.p99 * k)


@FAST
@given(
    kw=classes,
    rate=st.floats(0.01, 100),
    k=st.floats(1, 4),
    which=st.sampled_from(["all", "mean", "p50", "p95", "p99"]),
    target=st.sampled_from(["prompt_tokens", "output_tokens"]),
)
def test_longer_stated_lengths_never_lower_anything(kw, rate, k, which, target):
    small = size(make_input(arrival_rate_rps=rate, **kw))
    kw[target] = grow(kw[target], which, k)
    big = size(make_input(arrival_rate_rps=rate, **kw))
    assert_not_lower(small, big)


@FAST
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 300),
    extra_p=st.integers(0, 2000),
    extra_o=st.integers(0, 500),
    rate=st.floats(0.01, 100),
    timed=st.booleans(),
)
def test_longer_sampled_requests_never_lower_anything(seed, n, extra_p, extra_o, rate, timed):
    rng = np.random.default_rng(seed)
    p, o = rng.integers(1, 4000, n), rng.integers(1, 800, n)
    grow_p, grow_o = rng.integers(0, extra_p + 1, n), rng.integers(0, extra_o + 1, n)
    times = {"arrival_times_s": np.sort(rng.uniform(0, 300, n))} if timed and n >= 2 else {}
    small = size(
        make_input(
            arrival_rate_rps=rate,
            prompt_tokens=LengthSamples.of(p),
            output_tokens=LengthSamples.of(o),
            sim_requests=2000,
            **times,
        )
    )
    big = size(
        make_input(
            arrival_rate_rps=rate,
            prompt_tokens=LengthSamples.of(p + grow_p),
            output_tokens=LengthSamples.of(o + grow_o),
            sim_requests=2000,
            **times,
        )
    )
    assert_not_lower(small, big)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    n=st.integers(1, 5000),
    rate=st.floats(0.05, 500),
    c=st.floats(0, 1),
)
def test_littles_law_holds_in_the_simulation(seed, n, rate, c):
    # Simulated time-average requests in flight vs arrival rate × mean residence (from the sample means).
    rng = np.random.default_rng(seed)
    p, o = rng.integers(1, 8000, n), rng.integers(1, 2000, n)
    r = size(
        make_input(
            arrival_rate_rps=rate,
            prompt_tokens=LengthSamples.of(p),
            output_tokens=LengthSamples.of(o),
            cancellation_ratio=c,
            seed=seed % 1000,
            sim_requests=20_000,
        )
    )
    assert r.mean_concurrency == pytest.approx(rate * r.mean_residence_s)
    assert r.kv.mean_concurrency == pytest.approx(r.mean_concurrency, rel=0.01)


@FAST
@given(kw=classes, rate=st.one_of(st.just(0.0), st.floats(1e-6, 500)), zones=st.integers(2, 8))
def test_zone_rule_and_whole_replicas(kw, rate, zones):
    kw.update(failure_policy="zone", zones=zones)
    r = size(make_input(arrival_rate_rps=rate, **kw))
    rep = r.replicas
    for f in REPLICAS:
        assert type(getattr(rep, f)) is int
    assert rep.with_failure == -(-rep.steady * zones // (zones - 1))
    assert rep.steady == max(rep.for_load, rep.for_kv)
    assert rep.total == rep.with_failure + rep.startup_reserve
    assert r.accelerators == rep.total * r.operating_point_used.accelerators_per_replica
