"""What a caller sizing one class many times may share (issue 35.4): the KV replays across rates that
do not change them (KvReplays), and a fleet without the CU to buy (`fleet_only`) — with the same
figures as sizing each alone."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import pytest

import capacity.kv_replays as kv_replays
import capacity.sizing as sizing
from capacity.sizing import KvReplays, LengthSamples, size
from tests.capacity.test_sizing_sims import _figures, _trace_input


def test_replays_shared_across_rates_give_each_rate_its_own_figures():
    inp = _trace_input()
    busier = replace(inp, arrival_rate_rps=20.0)
    alone = size(busier)
    replays = KvReplays()
    with mock.patch.object(kv_replays, "simulate_class", wraps=kv_replays.simulate_class) as sim:
        size(inp, replays=replays)
        shared = size(busier, replays=replays)
    # A trace at its own timing replays the same at 12 and 20 req/s (and at the mean, for the peak's extra cost).
    assert sim.call_count == 1
    assert _figures(shared) == _figures(alone)


def test_replays_refuse_another_class():
    inp = _trace_input()
    replays = KvReplays()
    replays.get(inp, 1.0, 0.05)
    replays.get(replace(inp, arrival_rate_rps=30.0), 1.0, 0.05)  # another rate: the same class
    other = replace(inp, prompt_tokens=LengthSamples.of(inp.prompt_tokens.values.copy()))  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="prompt_tokens differs"):
        replays.get(other, 1.0, 0.05)
    with pytest.raises(ValueError, match="cancellation_ratio differs"):
        replays.get(replace(inp, cancellation_ratio=0.2), 1.0, 0.05)


def test_fleet_only_is_the_same_fleet_without_the_cu_to_buy():
    inp = _trace_input()
    full = size(inp)
    with mock.patch.object(sizing, "planning_answer", wraps=sizing.planning_answer) as answer:
        fleet = size(inp, fleet_only=True)
    assert answer.call_count == 0
    assert (fleet.planning, fleet.peak_extra_cost_per_hour) == (None, None)
    assert full.planning is not None and full.peak_extra_cost_per_hour == 4.0
    assert fleet.replicas == full.replicas
    assert fleet.cost.to_dict() == full.cost.to_dict()
    assert [(s.name, s.value, s.formula) for s in fleet.steps] == [(s.name, s.value, s.formula) for s in full.steps]
    assert fleet.alternatives == full.alternatives
    # Its notes are the full sizing's less the CU to buy and the peak's extra cost.
    assert fleet.assumptions == tuple(
        a for a in full.assumptions if not a.startswith(("CU to buy:", "cost: the planning rate"))
    )
