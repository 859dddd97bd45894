"""Scenarios built from many series' forecasts: the stress spike is correlated (no database)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from forecasting import demand

START = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday


def test_stress_spike_hits_every_series_at_the_same_hours():
    f1 = demand.SeriesForecast(
        ("a", "m", "r"), "ets", 48, START, np.ones(48), np.ones(48), np.full(48, 2.0), np.ones(1)
    )
    f2 = demand.SeriesForecast(
        ("b", "m", "r"), "ets", 48, START, np.ones(48), np.ones(48), np.full(48, 4.0), np.ones(1)
    )
    f1.p50[[9, 10, 33]] = 5.0  # expected demand peaks at 09:00 and 10:00
    hours = demand.spike_hours([f1, f2], 2)
    assert hours == [9, 10]
    s1 = demand.stress(f1, spike_pct=50, hours=hours)
    s2 = demand.stress(f2, spike_pct=50, hours=hours)
    assert list(np.flatnonzero(s1 > 2.0)) == [9, 10, 33, 34]
    assert list(np.flatnonzero(s2 > 4.0)) == [9, 10, 33, 34]
    assert s1[9] == 3.0 and s2[34] == 6.0
