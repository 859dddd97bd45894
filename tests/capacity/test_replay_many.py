"""capacity.replay_many: many draws replayed at once give exactly the one-draw rule's counts and answers."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.planning import Workload, allowed_throttles, plan, throttled_count
from capacity.replay_many import Rows, least_steps, throttled_counts


def _bursty(seed: int, n: int) -> Workload:
    """Requests in clumps (a 5 s burst at the start of each minute carries half of them), uneven costs."""
    rng = np.random.default_rng(seed)
    minute = rng.integers(0, 30, n)
    burst = rng.random(n) < 0.5
    t = np.sort(minute * 60.0 + np.where(burst, rng.uniform(0, 5, n), rng.uniform(0, 60, n)))
    return Workload(t, np.ceil(rng.lognormal(7.5, 1.0, n)), "test")


@pytest.mark.parametrize("cu", [0.5, 2.0, 6.0, 30.0])
def test_counts_equal_the_one_draw_rule(cu):
    draws = [_bursty(s, n) for s, n in enumerate([1, 50, 400, 2500, 0, 1200])]
    rows = Rows(draws)
    got = throttled_counts(rows, np.full(len(draws), cu), 1000.0, 60.0)
    assert got.tolist() == [throttled_count(w, cu, 1000.0, 60.0) for w in draws]
    # Each row at its own CU, a subset of rows, and stopping early once a row is over its limit.
    cus = np.array([0.5, 3.0, 6.0])
    which = np.array([1, 3, 5])
    stop = np.array([0, 2, 1])
    some = throttled_counts(rows, cus, 1000.0, 60.0, which=which, stop_after=stop)
    for k, (i, c) in enumerate(zip(which, cus, strict=True)):
        full = throttled_count(draws[i], c, 1000.0, 60.0)
        assert some[k] == full if full <= stop[k] else some[k] == stop[k] + 1


@pytest.mark.parametrize("target", [0.0001, 0.001, 0.05])
def test_least_steps_equal_the_one_draw_answers(target):
    draws = [_bursty(s, n) for s, n in enumerate([3, 80, 700, 3000, 1500], start=10)]
    rows = Rows(draws)
    allowed = np.array([allowed_throttles(len(w), target) for w in draws])
    for guess in (1, 40, 5000):
        steps, lost = least_steps(rows, r_wt_per_s=1000.0, allowed=allowed, guess=np.full(len(draws), guess),
                                  depth_s=60.0)  # fmt: skip
        assert not len(lost)
        want = [round(plan(w, r_wt_per_s=1000.0, target_throttled_share=target).cu_to_buy * 10) for w in draws]
        assert steps.tolist() == want, guess
