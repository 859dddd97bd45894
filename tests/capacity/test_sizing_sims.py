"""size() simulates KV once per latency pair (issue 35.5): points with the same TTFT and TPOT, and the
peak's extra cost on a trace at its own timing, reuse the replay, with the same figures as alone."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

import numpy as np

import capacity.kv_replays as kv_replays
import capacity.sizing as sizing
from capacity.sizing import LengthSamples, OperatingPoint, size
from capacity.units import ReferenceMix
from tests.capacity.test_sizing import ACC, POINT, make_input


def _trace_input(**kw: object):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(3)
    n = 3000
    times = np.sort(rng.uniform(0, 600, n))
    base: dict[str, object] = {
        "arrival_times_s": times,
        "arrival_rate_rps": 12.0,  # above the trace's 5 req/s: the peak's extra cost re-sizes at the mean
        "prompt_tokens": LengthSamples.of(rng.integers(50, 2000, n).tolist()),
        "output_tokens": LengthSamples.of(rng.integers(10, 400, n).tolist()),
        "trace_own_timing": True,
    }
    return make_input(**{**base, **kw})


def _figures(r):  # type: ignore[no-untyped-def]
    return (
        repr(r.to_dict()),
        [(s.name, s.value, s.formula) for s in r.steps],
        r.assumptions,
        r.alternatives,
        r.peak_extra_cost_per_hour,
        r.kv.hist_time_fraction.tolist(),
    )


def test_one_replay_per_latency_pair_and_the_same_figures():
    twin = OperatingPoint("twin", "a", 2, 1800, ReferenceMix(1000, 250), 2.0, 0.1, 1.0, 0.05)  # POINT's latencies
    other = OperatingPoint("other", "a", 1, 900, ReferenceMix(1000, 250), 2.0, 0.1, 0.5, 0.04)
    inp = _trace_input(operating_points=(POINT, twin, other), accelerators=(ACC,))
    with mock.patch.object(kv_replays, "simulate_class", wraps=kv_replays.simulate_class) as sim:
        shared = size(inp)
    assert sim.call_count == 2  # (1.0, 0.05) once for POINT, twin and the peak's re-sizing; (0.5, 0.04) once
    assert shared.peak_extra_cost_per_hour == 4.0

    # Without sharing: every sizing simulates its own replay.
    size_at = sizing._size_at

    def alone(*args, **kw):  # type: ignore[no-untyped-def]
        return size_at(*args[:3])

    with (
        mock.patch.object(sizing, "_size_at", side_effect=alone),
        mock.patch.object(kv_replays, "simulate_class", wraps=kv_replays.simulate_class) as sim,
    ):
        apart = size(inp)
    assert sim.call_count == 4
    assert _figures(apart) == _figures(shared)


def test_a_rate_dependent_replay_is_not_shared_across_rates():
    # Time-scaled to the planning rate (not its own timing): the mean rate's sizing replays anew.
    inp = _trace_input(trace_own_timing=False)
    sims = sizing.KvReplays()
    a = sims.get(inp, 1.0, 0.05)
    b = sims.get(replace(inp, arrival_rate_rps=6.0), 1.0, 0.05)
    assert a is not b and a.sim.kv_tokens_p99 != b.sim.kv_tokens_p99
    own, own_sims = replace(inp, trace_own_timing=True), sizing.KvReplays()  # another class: its own replays
    assert own_sims.get(own, 1.0, 0.05) is own_sims.get(replace(own, arrival_rate_rps=6.0), 1.0, 0.05)
