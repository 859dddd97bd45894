"""The busiest hour's mean CU (forecasting.peak_to_mean.busiest_hour_cu, issue 48.7): an hour the record
covers only in part is averaged over the part covered. Divided by the whole 3,600 s, ten minutes of live
traffic read as a sixth of their rate and the supply gap's peak-to-mean factor came out six times too high
(the demo's 705.9 CU expected gap for llama-3.1-405b-us-east-b200)."""

from __future__ import annotations

import numpy as np
import pytest

from capacity.planning import Workload
from forecasting.peak_to_mean import busiest_hour_cu

R = 1000.0


def _steady(start_s: float, minutes: int, per_s: float, cost: float) -> Workload:
    t = start_s + np.arange(int(minutes * 60 * per_s)) / per_s
    return Workload(t, np.full(len(t), cost), "steady")


def test_ten_minutes_of_traffic_are_their_own_rate_not_a_sixth_of_it():
    # 2 req/s × 1,000 wt = 2 CU, recorded for ten minutes from 12:40 of the window's third hour.
    w = _steady(2 * 3600 + 40 * 60, 10, 2.0, 1000.0)
    assert busiest_hour_cu(w, R) == pytest.approx(2.0)


def test_a_record_across_an_hour_boundary_is_each_hours_covered_part():
    # From :50 of hour 0 to :20 of hour 1 at 2 CU, then hour 1's last 40 minutes are quiet but recorded.
    w = _steady(50 * 60, 30, 2.0, 1000.0)
    tail = Workload(np.array([2 * 3600 - 30.0]), np.array([0.0]), "a request at the end")
    both = Workload(np.r_[w.arrival_s, tail.arrival_s], np.r_[w.cost_wt, tail.cost_wt], "both")
    # Hour 0: 10 covered minutes at 2 CU; hour 1: 20 busy minutes in 60 covered, 2/3 CU.
    assert busiest_hour_cu(both, R) == pytest.approx(2.0)


def test_whole_hours_are_their_mean():
    busy = _steady(0, 60, 3.0, 500.0)  # 1.5 CU
    calm = _steady(3600, 60, 1.0, 500.0)  # 0.5 CU
    w = Workload(np.r_[busy.arrival_s, calm.arrival_s], np.r_[busy.cost_wt, calm.cost_wt], "two hours")
    assert busiest_hour_cu(w, R) == pytest.approx(1.5)
    assert busiest_hour_cu(Workload(np.zeros(0), np.zeros(0), "none"), R) == 0.0
