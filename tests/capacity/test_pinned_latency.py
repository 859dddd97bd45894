"""Issue 38's sweep over the latency curve: protections its fits and fleet sizing could lose with the
other tests green (tests/mutations/catalogue.py L4, L5, L7, L8)."""

from __future__ import annotations

import math

import pytest

from capacity.latency_curve import MeasuredPoint, fit
from capacity.latency_fleet import Fleet
from capacity.operating_points import Slo

INTERACTIVE = MeasuredPoint("Interactive", 59545.45, 0.140, 0.0381)
SERVER = MeasuredPoint("Server", 99123.04, 0.436, 0.1324)
OFFLINE = MeasuredPoint("Offline", 101527.0, is_ceiling=True)
CEILING = MeasuredPoint("O", 2100, is_ceiling=True)


def test_tpot_that_does_not_rise_with_load_is_flat_at_the_worst_measured():
    # Measured TPOT falls from 0.05 s to 0.04 s as load doubles: no step-slope to fit, so no invented one
    c = fit([MeasuredPoint("lo", 1000, 0.2, 0.05), MeasuredPoint("hi", 2000, 0.5, 0.04), CEILING])
    assert (c.a_s, c.x_inf) == (0.05, math.inf)
    assert [c.tpot_p99(x) for x in (0, 1000, 2000, 2099)] == [0.05] * 4


def test_a_ttft_fit_below_zero_at_no_load_takes_a_positive_floor_and_never_reads_under_a_point():
    # A straight line through these two points crosses zero before no load (intercept about −0.13 s)
    lo, hi = MeasuredPoint("lo", 1000, 0.1, 0.02), MeasuredPoint("hi", 2000, 5.0, 0.03)
    c = fit([lo, hi, CEILING])
    assert c.p_s == pytest.approx(0.05)  # half the least measured TTFT
    assert c.ttft_p99(0) == pytest.approx(0.05)
    assert c.ttft_p99(2000) == pytest.approx(5.0)  # the binding point exactly
    assert c.ttft_p99(1000) >= 0.1  # the other one never under what was measured


def test_an_slo_under_the_curves_floor_needs_no_fleet():
    f = Fleet(fit([SERVER, OFFLINE, INTERACTIVE]), 1000.0, 3.0, 1.1)
    assert f.replicas_for(Slo(ttft_p99_s=0.001, tpot_p99_s=1.0), 10.0, 1.2) is None


@pytest.mark.parametrize("margin", [1.0, 1.2, 1.3])
def test_the_fleet_holds_the_margin_at_every_whole_multiple_of_a_replica(margin):
    # At rate = k replicas' worth ÷ margin the division's rounding can land a replica short; the answer
    # must still hold the margin, with one replica fewer not holding it
    f = Fleet(fit([SERVER, OFFLINE, INTERACTIVE]), 1000.0, 3.0, 1.1)
    slo = Slo(ttft_p99_s=2.0, tpot_p99_s=0.1)
    per = f.breaking_rate(slo, 1)
    for k in range(1, 60):
        rate = k * per / margin
        n = f.replicas_for(slo, rate, margin)
        assert n is not None and f.breaking_rate(slo, n) >= margin * rate, k
        assert n == 1 or f.breaking_rate(slo, n - 1) < margin * rate, k
