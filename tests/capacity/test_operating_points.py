"""capacity.operating_points: which measured points a class's SLO accepts (sizing then takes the
cheapest of them: tests/capacity/test_point_choice.py)."""

from __future__ import annotations

import pytest

from capacity.input_errors import SizingInputError
from capacity.operating_points import (
    OperatingPoint,
    Slo,
    feasible_points,
    latencies_used,
    meets_slo,
)
from capacity.units import ReferenceMix

MIX = ReferenceMix(1000, 250)

SERVER = OperatingPoint("server", "h200", 8, 34000, MIX, 2.0, 0.2, 1.717, 0.1956)
INTERACTIVE = OperatingPoint("interactive", "h200", 8, 23000, MIX, 0.45, 0.04, 0.432, 0.0396)
OFFLINE = OperatingPoint("offline", "h200", 8, 35000, MIX, is_ceiling=True)
SMALL = OperatingPoint("one-gpu", "h100", 1, 5000, MIX, 2.0, 0.1, None, None)


def test_every_measured_point_within_the_slo_is_feasible_and_no_ceiling():
    points, what = feasible_points([INTERACTIVE, SERVER, OFFLINE], Slo(2.0, 0.2), model="m")
    assert points == [INTERACTIVE, SERVER]
    assert what == "2 measured point(s) of m within TTFT p99 ≤ 2 s and TPOT p99 ≤ 0.2 s"


def test_tight_slo_keeps_only_the_interactive_point():
    assert feasible_points([SERVER, INTERACTIVE], Slo(0.5, 0.05), model="m")[0] == [INTERACTIVE]


def test_measured_p99_can_qualify_a_point_whose_limit_is_looser():
    # SERVER's limit is 2 s / 200 ms but it measured 1.717 s / 195.6 ms: an SLO of 1.8 s / 196 ms accepts it.
    assert meets_slo(SERVER, Slo(1.8, 0.196))
    assert not meets_slo(SERVER, Slo(1.7, 0.196))


def test_limit_alone_qualifies_when_nothing_was_measured():
    assert meets_slo(SMALL, Slo(2.0, 0.1))
    assert not meets_slo(SMALL, Slo(2.0, 0.09))


def test_accelerator_filter():
    assert feasible_points([SERVER, SMALL], Slo(2.0, 0.2), model="m", accelerator="h200")[0] == [SERVER]
    with pytest.raises(SizingInputError) as e:
        feasible_points([SERVER], Slo(2.0, 0.2), model="m", accelerator="tpu")
    assert (e.value.field, e.value.message) == ("operating_points", "no operating points of m on tpu")


def test_ceiling_is_never_chosen_silently():
    with pytest.raises(SizingInputError) as e:
        feasible_points([SERVER, INTERACTIVE, OFFLINE], Slo(0.3, 0.03), model="llama")
    assert e.value.field == "slo"
    assert e.value.message == (
        "no measured operating point of llama meets TTFT p99 ≤ 0.3 s and TPOT p99 ≤ 0.03 s; "
        "the tightest measured is interactive (TTFT p99 0.432 s, TPOT p99 0.0396 s)"
    )


def test_only_ceilings():
    with pytest.raises(SizingInputError) as e:
        feasible_points([OFFLINE], Slo(2, 0.2), model="m")
    assert e.value.message.endswith("there are only throughput ceilings with no latency bound")


def test_allow_ceiling_says_so():
    points, what = feasible_points([INTERACTIVE, OFFLINE], Slo(0.3, 0.03), model="m", allow_ceiling=True)
    assert points == [OFFLINE]
    assert "throughput ceiling(s) with no latency bound" in what
    assert "the SLO is not verified" in what


def test_allow_ceiling_still_prefers_a_measured_point():
    assert feasible_points([SERVER, OFFLINE], Slo(2, 0.2), model="m", allow_ceiling=True)[0] == [SERVER]


def test_latencies_used():
    assert latencies_used(SERVER, Slo(2, 0.2)) == (1.717, 0.1956, "TTFT from measured p99, TPOT from measured p99")
    assert latencies_used(SMALL, Slo(2, 0.2)) == (2.0, 0.1, "TTFT from the point's limit, TPOT from the point's limit")
    ttft, tpot, source = latencies_used(OFFLINE, Slo(1.5, 0.05))
    assert (ttft, tpot) == (1.5, 0.05)
    assert source == (
        "TTFT from the class SLO (the point has no latency bound), TPOT from the class SLO (the point has no latency bound)"
    )


@pytest.mark.parametrize(
    ("point", "field"),
    [
        (OperatingPoint("x", "a", 1, 0, MIX, 1, 1), "operating_points[0].out_tps_per_replica"),
        (OperatingPoint("x", "a", 0, 10, MIX, 1, 1), "operating_points[0].accelerators_per_replica"),
        (OperatingPoint("x", "a", 1, 10, MIX, -1, 1), "operating_points[0].ttft_limit_s"),
    ],
)
def test_bad_points(point, field):
    with pytest.raises(SizingInputError) as e:
        feasible_points([point], Slo(2, 0.2), model="m")
    assert e.value.field == field


@pytest.mark.parametrize(("slo", "field"), [(Slo(0, 0.2), "slo.ttft_p99_s"), (Slo(2, -1), "slo.tpot_p99_s")])
def test_bad_slo(slo, field):
    with pytest.raises(SizingInputError) as e:
        feasible_points([SERVER], slo, model="m")
    assert e.value.field == field
