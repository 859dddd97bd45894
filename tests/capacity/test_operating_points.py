"""capacity.operating_points: which measured point a class's SLO accepts."""

from __future__ import annotations

import pytest

from capacity.input_errors import SizingInputError
from capacity.operating_points import (
    OperatingPoint,
    Slo,
    choose_operating_point,
    latencies_used,
    meets_slo,
)
from capacity.units import ReferenceMix

MIX = ReferenceMix(1000, 250)

SERVER = OperatingPoint("server", "h200", 8, 34000, MIX, 2.0, 0.2, 1.717, 0.1956)
INTERACTIVE = OperatingPoint("interactive", "h200", 8, 23000, MIX, 0.45, 0.04, 0.432, 0.0396)
OFFLINE = OperatingPoint("offline", "h200", 8, 35000, MIX, is_ceiling=True)
SMALL = OperatingPoint("one-gpu", "h100", 1, 5000, MIX, 2.0, 0.1, None, None)


def test_prefers_highest_goodput_that_meets_the_slo():
    choice = choose_operating_point([INTERACTIVE, SERVER, OFFLINE], Slo(2.0, 0.2), model="m", w_out=4)
    assert choice.point is SERVER
    assert choice.assumptions == (
        "operating point server (TTFT p99 1.717 s, TPOT p99 0.1956 s): highest goodput per accelerator of 2 "
        "measured point(s) within TTFT p99 ≤ 2 s and TPOT p99 ≤ 0.2 s",
    )


def test_tight_slo_gets_the_interactive_point():
    assert choose_operating_point([SERVER, INTERACTIVE], Slo(0.5, 0.05), model="m", w_out=4).point is INTERACTIVE


def test_measured_p99_can_qualify_a_point_whose_limit_is_looser():
    # SERVER's limit is 2 s / 200 ms but it measured 1.717 s / 195.6 ms: an SLO of 1.8 s / 196 ms accepts it.
    assert meets_slo(SERVER, Slo(1.8, 0.196))
    assert not meets_slo(SERVER, Slo(1.7, 0.196))


def test_limit_alone_qualifies_when_nothing_was_measured():
    assert meets_slo(SMALL, Slo(2.0, 0.1))
    assert not meets_slo(SMALL, Slo(2.0, 0.09))


def test_ranks_per_accelerator():
    # SMALL: 5,000 tok/s on 1 GPU beats SERVER's 34,000 on 8 (4,250 per GPU)
    assert choose_operating_point([SERVER, SMALL], Slo(2.0, 0.2), model="m", w_out=4).point is SMALL


def test_accelerator_filter():
    assert (
        choose_operating_point([SERVER, SMALL], Slo(2.0, 0.2), model="m", w_out=4, accelerator="h200").point is SERVER
    )
    with pytest.raises(SizingInputError) as e:
        choose_operating_point([SERVER], Slo(2.0, 0.2), model="m", w_out=4, accelerator="tpu")
    assert (e.value.field, e.value.message) == ("operating_points", "no operating points of m on tpu")


def test_ceiling_is_never_chosen_silently():
    with pytest.raises(SizingInputError) as e:
        choose_operating_point([SERVER, INTERACTIVE, OFFLINE], Slo(0.3, 0.03), model="llama", w_out=4)
    assert e.value.field == "slo"
    assert e.value.message == (
        "no measured operating point of llama meets TTFT p99 ≤ 0.3 s and TPOT p99 ≤ 0.03 s; "
        "the tightest measured is interactive (TTFT p99 0.432 s, TPOT p99 0.0396 s)"
    )


def test_only_ceilings():
    with pytest.raises(SizingInputError) as e:
        choose_operating_point([OFFLINE], Slo(2, 0.2), model="m", w_out=4)
    assert e.value.message.endswith("there are only throughput ceilings with no latency bound")


def test_allow_ceiling_says_so():
    choice = choose_operating_point([INTERACTIVE, OFFLINE], Slo(0.3, 0.03), model="m", w_out=4, allow_ceiling=True)
    assert choice.point is OFFLINE
    assert "throughput ceiling with no latency bound" in choice.assumptions[0]
    assert "the SLO is not verified" in choice.assumptions[0]


def test_allow_ceiling_still_prefers_a_measured_point():
    choice = choose_operating_point([SERVER, OFFLINE], Slo(2, 0.2), model="m", w_out=4, allow_ceiling=True)
    assert choice.point is SERVER


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
        choose_operating_point([point], Slo(2, 0.2), model="m", w_out=4)
    assert e.value.field == field


@pytest.mark.parametrize(("slo", "field"), [(Slo(0, 0.2), "slo.ttft_p99_s"), (Slo(2, -1), "slo.tpot_p99_s")])
def test_bad_slo(slo, field):
    with pytest.raises(SizingInputError) as e:
        choose_operating_point([SERVER], slo, model="m", w_out=4)
    assert e.value.field == field
