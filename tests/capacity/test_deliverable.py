"""capacity.deliverable: physical − reserve − maintenance − safety − fragmentation (docs/contract.md §2)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from capacity.deliverable import PoolSupply, deliverable, deliverable_under_failure
from capacity.failure import FailurePolicy


def supply(**kw):
    base = {"replicas_per_zone": (4, 3, 3), "cu_per_replica": 10.0}
    base.update(kw)
    return PoolSupply(**base)


def test_terms_exact():
    # physical 10 × 10 = 100; maintenance 5 % = 5; safety 10 % = 10; fragmentation 2 % = 2; reserve 8
    # deliverable = 100 − 8 − 5 − 10 − 2 = 75
    d = deliverable(supply(maintenance_pct=5, safety_pct=10, fragmentation_pct=2, reserve_held_cu=8))
    assert d.physical == 100
    assert d.deliverable == 75
    assert d.terms() == [
        ("deliverable", 75.0),
        ("failover reserve", 8.0),
        ("maintenance", 5.0),
        ("safety margin", 10.0),
        ("fragmentation", 2.0),
    ]


def test_never_negative():
    d = deliverable(supply(reserve_held_cu=500))
    assert d.deliverable == 0.0


def test_replica_override():
    assert deliverable(supply(), replicas=7).physical == 70


def test_under_zone_failure():
    # lose the largest zone (4): 6 × 10 = 60, less 10 % safety = 54
    d = deliverable_under_failure(supply(safety_pct=10), FailurePolicy("zone"))
    assert d.physical == 60
    assert d.deliverable == 54


def test_under_replica_and_fraction_failure():
    assert deliverable_under_failure(supply(), FailurePolicy("replica", n=2)).physical == 80
    # ⌈0.25 × 10⌉ = 3 lost
    assert deliverable_under_failure(supply(), FailurePolicy("fraction", f=0.25)).physical == 70


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"replicas_per_zone": (1, -1)}, "replicas_per_zone"),
        ({"cu_per_replica": -1}, "cu_per_replica"),
        ({"maintenance_pct": 101}, "maintenance_pct"),
        ({"safety_pct": -1}, "safety_pct"),
        ({"fragmentation_pct": 200}, "fragmentation_pct"),
        ({"reserve_held_cu": -0.5}, "reserve_held_cu"),
    ],
)
def test_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        supply(**kw)


@given(
    zones=st.lists(st.integers(0, 50), min_size=1, max_size=5),
    cu=st.floats(0, 100),
    pcts=st.tuples(st.floats(0, 30), st.floats(0, 30), st.floats(0, 30)),
)
def test_terms_sum_to_physical_when_not_clamped(zones, cu, pcts):
    s = PoolSupply(tuple(zones), cu, *pcts)
    d = deliverable(s)
    assert sum(v for _, v in d.terms()) == pytest.approx(d.physical, abs=1e-9)


@given(zones=st.lists(st.integers(0, 50), min_size=2, max_size=5), cu=st.floats(0, 100))
def test_failure_never_adds_capacity(zones, cu):
    s = PoolSupply(tuple(zones), cu)
    for policy in (FailurePolicy("zone"), FailurePolicy("replica", n=1), FailurePolicy("fraction", f=0.5)):
        assert deliverable_under_failure(s, policy).deliverable <= deliverable(s).deliverable
