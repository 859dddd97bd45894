"""Issue 38: two sizing promises pinned by exact values.

- The busiest minute (`peak_1m`) is the most requests in a 60 s window starting at any request, not
  only on the one-second grid (mutation M8 keeps the grid only).
- Past the closed-form switch, each KV figure is the larger of the simulation's and the closed form's:
  a bursty trace keeps its own (higher) p99 (mutation M9 takes the closed form alone).
"""

from __future__ import annotations

import numpy as np

from capacity.kv_demand import simulate_class
from capacity.lengths import Z99, LengthSamples
from capacity.rate_basis import minute_rates
from tests.capacity.test_sizing import make_input


def test_the_busiest_minute_starts_at_a_request_not_on_the_grid():
    # Grid windows start at 0, 1, …, 40 s: [5, 65) holds 1 request, [6, 66) holds 2, none holds 3.
    # The window starting at the request at 5.5 s, [5.5, 65.5), holds 5.5, 65.4 and 65.45: 3.
    rates = minute_rates(np.array([0.0, 5.5, 65.4, 65.45, 100.0]))
    assert float(rates.window_rates.max()) == 2 / 60
    assert rates.rates["peak_1m"] == 3 / 60


def test_a_bursty_trace_keeps_its_simulated_kv_p99_past_the_switch():
    # 9,999 arrivals in the first second of a 99 s trace and one at 99 s, time-scaled to 1,000 req/s:
    # a 10 s circle whose burst takes 0.1 s. Each request holds 90 + 10 = 100 KV tokens for
    # 1 + 10 × 0.1 = 2 s, so for most of the 2 s after the burst all 10,000 are in flight.
    n = 10_000
    times = np.concatenate([np.linspace(0.0, 1.0, n - 1), [99.0]])
    inp = make_input(
        arrival_rate_rps=1000.0, arrival_times_s=times,
        prompt_tokens=LengthSamples.of([90] * n), output_tokens=LengthSamples.of([10] * n),
    )  # fmt: skip
    sim = simulate_class(inp, ttft_s=1.0, tpot_s=0.1).sim
    # mean concurrency 1,000 × 2 = 2,000 > the switch (max(0.1 × 10,000, 1,000)): the closed form is consulted
    assert round(sim.mean_concurrency, 6) == 2000.0
    closed_form = 1000 * 100 * 2 + Z99 * (1000 * 100**2 * 2) ** 0.5  # λ·E[kv·R] + z99·√(λ·E[kv²·R]) ≈ 210,403
    assert closed_form < 211_000
    assert sim.kv_tokens_p99 == 1_000_000.0  # the simulation's own: 10,000 × 100 tokens at once
    assert sim.kv_tokens_max == 1_000_000.0
