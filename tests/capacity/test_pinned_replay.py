"""Issue 38's sweep over the planning replay: protections the property tests could lose unnoticed
(tests/mutations/catalogue.py R2, R5, R6)."""

from __future__ import annotations

import numpy as np

from capacity.bucket import refilled
from capacity.planning import PlanningAnswer, Replay, Workload, plan, replay

R = 1000.0


def test_a_clock_read_that_repeats_or_steps_back_never_drains_the_bucket():
    # A second clock read under a lock may come out earlier than the first: the level stays, not lowered
    assert refilled(500.0, 10.0, 1000.0, -3.0) == 500.0
    assert refilled(500.0, 10.0, 1000.0, 0.0) == 500.0
    assert refilled(500.0, 10.0, 1000.0, 20.0) == 700.0


def test_the_throttles_allowed_are_counted_as_a_reader_compares_them():
    # 100 requests at once, each 6000 / 71.5 wt: 0.1 CU (a 6,000 wt bucket) admits 71 and throttles 29.
    # 29 / 100 = 0.29 meets a 0.29 target, though 0.29 × 100 is 28.999… in floating point.
    w = Workload(np.zeros(100), np.full(100, 6000 / 71.5), "all at once")
    assert replay(w, 0.1, R).throttled == 29
    a = plan(w, r_wt_per_s=R, target_throttled_share=0.29)
    assert (a.cu_to_buy, a.replay.throttled, a.holds) == (0.1, 29, True)


def test_the_check_fails_when_one_step_less_would_also_do():
    within = Replay(0.9, 0, 100)
    assert not PlanningAnswer(1.0, 0.01, Replay(1.0, 0, 100), within, "hand-made").holds
    over = Replay(0.9, 2, 100)
    assert PlanningAnswer(1.0, 0.01, Replay(1.0, 1, 100), over, "hand-made").holds
    assert not PlanningAnswer(1.0, 0.01, Replay(1.0, 2, 100), Replay(0.9, 3, 100), "hand-made").holds
