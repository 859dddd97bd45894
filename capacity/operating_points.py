"""Measured operating points and the choice of one for a request class's SLO.

A point is usable for a class when its latency is known to be within the class's SLO: either the
benchmark's stated limit or the submitter's measured p99 is ≤ the SLO, for TTFT and for TPOT.
Throughput ceilings (no latency bound, e.g. offline runs) are not a service rate for an interactive
pool, so they are only used when the caller asks for it — and then the result says so. Nothing
is interpolated or extrapolated between points.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from capacity.input_errors import SizingInputError
from capacity.ranges import in_range
from capacity.steps import num
from capacity.units import ReferenceMix, replica_goodput_wt_per_s


@dataclass(frozen=True)
class Slo:
    ttft_p99_s: float
    tpot_p99_s: float


@dataclass(frozen=True)
class OperatingPoint:
    """Output tokens/s one replica sustains on `ref_mix`; limits None = no bound was applied."""

    label: str
    accelerator: str
    accelerators_per_replica: int
    out_tps_per_replica: float
    ref_mix: ReferenceMix
    ttft_limit_s: float | None = None
    tpot_limit_s: float | None = None
    measured_ttft_p99_s: float | None = None
    measured_tpot_p99_s: float | None = None
    is_ceiling: bool = False
    source: str = ""
    # Copies of the weights one replica holds (e.g. 8 single-GPU instances of an 8B model on 8 GPUs).
    instances_per_replica: int = 1

    @property
    def ttft_s(self) -> float | None:
        """The TTFT the point is known to deliver: its measured p99, else its limit."""
        return self.measured_ttft_p99_s if self.measured_ttft_p99_s is not None else self.ttft_limit_s

    @property
    def tpot_s(self) -> float | None:
        return self.measured_tpot_p99_s if self.measured_tpot_p99_s is not None else self.tpot_limit_s

    @property
    def bounded(self) -> bool:
        """A measured point: not a ceiling, and both latencies are known."""
        return not self.is_ceiling and self.ttft_s is not None and self.tpot_s is not None


def _within(limit: float | None, measured: float | None, slo: float) -> bool:
    return (limit is not None and limit <= slo) or (measured is not None and measured <= slo)


def meets_slo(point: OperatingPoint, slo: Slo) -> bool:
    if not point.bounded:
        return False
    ttft_ok = _within(point.ttft_limit_s, point.measured_ttft_p99_s, slo.ttft_p99_s)
    tpot_ok = _within(point.tpot_limit_s, point.measured_tpot_p99_s, slo.tpot_p99_s)
    return ttft_ok and tpot_ok


def goodput_wt_per_accelerator(point: OperatingPoint, w_out: float) -> float:
    """The ranking key: replicas of different sizes are compared per accelerator."""
    wt = replica_goodput_wt_per_s(out_tps_at_slo=point.out_tps_per_replica, mix=point.ref_mix, w_out=w_out)
    return wt / point.accelerators_per_replica


def _latency(x: float | None) -> str:
    return "unbounded" if x is None else f"{num(x)} s"


def describe_point(point: OperatingPoint) -> str:
    return f"{point.label} (TTFT p99 {_latency(point.ttft_s)}, TPOT p99 {_latency(point.tpot_s)})"


def feasible_points(
    points: Sequence[OperatingPoint],
    slo: Slo,
    *,
    model: str,
    accelerator: str | None = None,
    allow_ceiling: bool = False,
) -> tuple[list[OperatingPoint], str]:
    """Every measured point meeting `slo` (on `accelerator`, if pinned), and what they are.

    With `allow_ceiling`, ceilings stand in only when no measured point fits, and the note says
    the SLO is then unverified. Raises SizingInputError("slo") naming the tightest measured point
    when nothing fits. Sizing then picks the cheapest of them (capacity.sizing).
    """
    validate_slo(slo)
    validate_points(points)
    if accelerator is not None:
        points = [p for p in points if p.accelerator == accelerator]
    if not points:
        where = f" on {accelerator}" if accelerator else ""
        raise SizingInputError("operating_points", f"no operating points of {model}{where}")
    fitting = [p for p in points if meets_slo(p, slo)]
    if fitting:
        return fitting, (
            f"{len(fitting)} measured point(s) of {model} within TTFT p99 ≤ {num(slo.ttft_p99_s)} s and "
            f"TPOT p99 ≤ {num(slo.tpot_p99_s)} s"
        )
    ceilings = [p for p in points if not p.bounded]
    if allow_ceiling and ceilings:
        return ceilings, (
            f"{len(ceilings)} throughput ceiling(s) with no latency bound, used because allow_ceiling was set and "
            f"no measured point meets the SLO: the SLO is not verified and this sizing is optimistic"
        )
    measured = [p for p in points if p.bounded]
    head = (
        f"no measured operating point of {model} meets TTFT p99 ≤ {num(slo.ttft_p99_s)} s "
        f"and TPOT p99 ≤ {num(slo.tpot_p99_s)} s"
    )
    if not measured:
        raise SizingInputError("slo", f"{head}; there are only throughput ceilings with no latency bound")
    tightest = min(measured, key=lambda p: max(_ratio(p.ttft_s, slo.ttft_p99_s), _ratio(p.tpot_s, slo.tpot_p99_s)))
    raise SizingInputError("slo", f"{head}; the tightest measured is {describe_point(tightest)}")


def _ratio(x: float | None, slo: float) -> float:
    return float("inf") if x is None else x / slo


def latencies_used(point: OperatingPoint, slo: Slo) -> tuple[float, float, str]:
    """TTFT and TPOT for the residence time: measured p99s, else the point's limits, else the SLO
    (only for an allowed ceiling). Returns (ttft_s, tpot_s, where each came from)."""

    def pick(measured: float | None, limit: float | None, fallback: float) -> tuple[float, str]:
        if measured is not None:
            return measured, "measured p99"
        if limit is not None:
            return limit, "the point's limit"
        return fallback, "the class SLO (the point has no latency bound)"

    ttft, ttft_from = pick(point.measured_ttft_p99_s, point.ttft_limit_s, slo.ttft_p99_s)
    tpot, tpot_from = pick(point.measured_tpot_p99_s, point.tpot_limit_s, slo.tpot_p99_s)
    return ttft, tpot, f"TTFT from {ttft_from}, TPOT from {tpot_from}"


def validate_points(points: Sequence[OperatingPoint]) -> None:
    for i, p in enumerate(points):
        if not p.out_tps_per_replica > 0:
            raise SizingInputError(f"operating_points[{i}].out_tps_per_replica", "must be > 0")
        if p.accelerators_per_replica < 1:
            raise SizingInputError(f"operating_points[{i}].accelerators_per_replica", "must be ≥ 1")
        if p.instances_per_replica < 1:
            raise SizingInputError(f"operating_points[{i}].instances_per_replica", "must be ≥ 1")
        for name in ("ttft_limit_s", "tpot_limit_s", "measured_ttft_p99_s", "measured_tpot_p99_s"):
            x = getattr(p, name)
            if x is not None and not x > 0:
                raise SizingInputError(f"operating_points[{i}].{name}", "must be > 0 or empty")


def validate_slo(slo: Slo) -> None:
    for name in ("ttft_p99_s", "tpot_p99_s"):
        in_range(f"slo.{name}", getattr(slo, name))
