"""capacity.failure: policy parsing and the replicas a stated failure needs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.failure import FailurePolicy, parse_failure_policy, replicas_for_failure, replicas_lost


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        ("", FailurePolicy("none")),
        ("none", FailurePolicy("none")),
        (" Zone ", FailurePolicy("zone")),
        ("replica:2", FailurePolicy("replica", n=2)),
        ("fraction:0.25", FailurePolicy("fraction", f=0.25)),
    ],
)
def test_parse(text, policy):
    assert parse_failure_policy(text) == policy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("replica:x", "needs a whole number"),
        ("replica:-1", "n must be ≥ 0"),
        ("fraction:abc", "needs a number"),
        ("fraction:1", r"f must be in \[0, 1\)"),
        ("rack", "expected replica:n, zone, fraction:f or none"),
    ],
)
def test_parse_rejects(text, message):
    with pytest.raises(ValueError, match=message):
        parse_failure_policy(text)


def test_str_and_describe():
    assert str(FailurePolicy("replica", n=1)) == "replica:1"
    assert str(FailurePolicy("fraction", f=0.1)) == "fraction:0.1"
    assert str(FailurePolicy("zone")) == "zone"
    assert FailurePolicy("replica", n=1).describe() == "lose 1 replica"
    assert FailurePolicy("replica", n=3).describe() == "lose 3 replicas"
    assert FailurePolicy("zone").describe() == "lose the largest zone"
    assert FailurePolicy("fraction", f=0.1).describe() == "lose ⌈0.1 × replicas⌉"
    assert FailurePolicy("none").describe() == "no failure planned"


def test_replicas_lost():
    zones = (4, 3, 3)
    assert replicas_lost(FailurePolicy("replica", n=2), zones) == 2
    assert replicas_lost(FailurePolicy("replica", n=20), zones) == 10
    assert replicas_lost(FailurePolicy("zone"), zones) == 4
    # ⌈0.25 × 10⌉ = 3
    assert replicas_lost(FailurePolicy("fraction", f=0.25), zones) == 3
    # ⌈0.2 × 10⌉ = 2 exactly, not 3 from float noise
    assert replicas_lost(FailurePolicy("fraction", f=0.2), zones) == 2
    assert replicas_lost(FailurePolicy("none"), zones) == 0


def test_replicas_for_failure_examples():
    # zone, 3 zones: ⌈10 × 3 / 2⌉ = 15; 2 zones: ⌈10 × 2 / 1⌉ = 20; 4 zones: ⌈7 × 4 / 3⌉ = ⌈9.33⌉ = 10
    assert replicas_for_failure(10, FailurePolicy("zone"), 3) == 15
    assert replicas_for_failure(10, FailurePolicy("zone"), 2) == 20
    assert replicas_for_failure(7, FailurePolicy("zone"), 4) == 10
    assert replicas_for_failure(10, FailurePolicy("replica", n=2), 1) == 12
    # fraction 0.25: n = 14 loses ⌈3.5⌉ = 4 → 10 left; n = 13 loses ⌈3.25⌉ = 4 → 9
    assert replicas_for_failure(10, FailurePolicy("fraction", f=0.25), 1) == 14
    assert replicas_for_failure(10, FailurePolicy("none"), 1) == 10
    assert replicas_for_failure(0, FailurePolicy("zone"), 3) == 0


def test_replicas_for_failure_rejects():
    with pytest.raises(ValueError, match="steady must be ≥ 0"):
        replicas_for_failure(-1, FailurePolicy("none"), 1)
    with pytest.raises(ValueError, match="at least 2 zones"):
        replicas_for_failure(3, FailurePolicy("zone"), 1)


@given(steady=st.integers(1, 5000), zones=st.integers(2, 12))
def test_zone_rule(steady, zones):
    n = replicas_for_failure(steady, FailurePolicy("zone"), zones)
    assert n == -(-steady * zones // (zones - 1))
    # Spread evenly, the largest zone holds ⌈n / Z⌉; losing it still leaves steady.
    assert n - math.ceil(n / zones) >= steady


@given(steady=st.integers(1, 2000), f=st.floats(0, 0.9))
def test_fraction_rule_is_the_fewest(steady, f):
    policy = FailurePolicy("fraction", f=f)
    n = replicas_for_failure(steady, policy, 1)
    assert n - replicas_lost(policy, (n,)) >= steady
    assert (n - 1) - replicas_lost(policy, (n - 1,)) < steady


@given(a=st.integers(0, 1000), b=st.integers(0, 1000), n=st.integers(0, 5))
def test_monotone_in_steady(a, b, n):
    lo, hi = sorted((a, b))
    for policy, zones in (
        (FailurePolicy("zone"), 3),
        (FailurePolicy("replica", n=n), 1),
        (FailurePolicy("fraction", f=0.3), 1),
    ):
        assert replicas_for_failure(lo, policy, zones) <= replicas_for_failure(hi, policy, zones)
