"""Orders that close the gap (issue 30.4): the least replicas which, placed smallest zone first,
cover the demand healthy and after the stated failure in every week; one fewer does not."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from capacity.deliverable import PoolSupply, deliverable, deliverable_under_failure
from capacity.failure import parse_failure_policy
from capacity.planning_orders import add_replicas, order_to_close

policies = st.sampled_from(["none", "zone", "replica:1", "replica:3", "fraction:0.25", "fraction:0.5"])


def _both(s: PoolSupply, policy_text: str, extra: int) -> tuple[float, float]:
    after = replace(s, replicas_per_zone=add_replicas(s.replicas_per_zone, extra))
    return deliverable(after).deliverable, deliverable_under_failure(
        after, parse_failure_policy(policy_text)
    ).deliverable


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=2, max_size=4),
    policies,
    st.lists(st.floats(0, 3000), min_size=1, max_size=6),
    st.floats(0, 20),
)
def test_the_order_covers_every_week_in_both_cases_and_one_fewer_does_not(zones, policy, demand, safety):
    base = PoolSupply(tuple(zones), 70.0, safety_pct=safety, reserve_held_cu=10.0)
    weekly = [replace(base, replicas_per_zone=add_replicas(base.replicas_per_zone, i)) for i in range(len(demand))]
    o = order_to_close(weekly, demand, parse_failure_policy(policy))
    assert o.closes and o.replicas is not None
    for s, d in zip(weekly, demand, strict=True):
        healthy, failed = _both(s, policy, o.replicas)
        assert healthy >= d and failed >= d
    if o.replicas > 0:
        healthy, failed = _both(weekly[o.week], policy, o.replicas - 1)
        assert healthy < demand[o.week] or failed < demand[o.week]
    assert sum(o.added_per_zone) == o.replicas
    assert (o.healthy_cu, o.failure_cu) == _both(weekly[o.week], policy, o.replicas)


def test_the_zone_spread_is_counted():
    # 2 + 2 replicas of 70 CU, a zone lost: 140 left. 200 CU needs 3 + 3 (210), not the one replica
    # a healthy-only count asks (280 + 70 ≥ 200 healthy, but 3 + 2 still loses 3).
    o = order_to_close([PoolSupply((2, 2), 70.0)], [200.0], parse_failure_policy("zone"))
    assert (o.replicas, o.added_per_zone, o.healthy_cu, o.failure_cu) == (2, (1, 1), 420.0, 210.0)


def test_one_zone_under_a_zone_policy_cannot_close():
    o = order_to_close([PoolSupply((4,), 70.0)], [100.0], parse_failure_policy("zone"))
    assert not o.closes and "one zone" in o.reason


def test_a_cap_past_which_it_says_so():
    o = order_to_close([PoolSupply((1, 1), 70.0)], [1e9], parse_failure_policy("zone"), cap=1000)
    assert not o.closes and "more than 1,000 replicas" in o.reason
