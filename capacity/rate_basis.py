"""The planning rate of a trace (docs/contract.md §3 "Planning rate"): size for the busy minute, not the mean.

One-minute rates are taken over **sliding** windows: a 60 s window starting every second (every
duration ÷ 100,000 s on traces longer than about 28 hours, so the work stays bounded). `p95_1m` and
`p99_1m` are percentiles of those windows' rates; `peak_1m` is the busiest 60 s window starting at
any request (the exact sliding maximum, ≥ every grid window); `mean` is requests ÷ duration. A
trace shorter than a minute has one window, at its mean rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from capacity.input_errors import SizingInputError

Basis = Literal["mean", "p95_1m", "p99_1m", "peak_1m"]
BASES: tuple[Basis, ...] = ("mean", "p95_1m", "p99_1m", "peak_1m")
DEFAULT_TRACE_BASIS: Basis = "peak_1m"
WINDOW_S = 60.0
MAX_WINDOWS = 100_000


@dataclass(frozen=True, eq=False)
class MinuteRates:
    """The rate of every sliding one-minute window, and the four planning rates."""

    window_rates: npt.NDArray[np.float64]
    step_s: float
    rates: dict[str, float]

    def rate(self, basis: str) -> float:
        if basis not in self.rates:
            raise SizingInputError("arrival_rate_basis", f"expected one of {', '.join(BASES)} (got {basis!r})")
        return self.rates[basis]


def minute_rates(arrival_s: npt.NDArray[np.float64]) -> MinuteRates:
    """`arrival_s` sorted ascending (as capacity.traces gives it)."""
    t = np.asarray(arrival_s, dtype=np.float64)
    n = len(t)
    if n == 0:
        raise SizingInputError("trace", "has no requests")
    duration = float(t[-1] - t[0])
    mean = n / max(duration, 1.0)
    if duration < WINDOW_S:
        window_rates = np.array([mean])
        step = WINDOW_S
        peak = mean
    else:
        span = duration - WINDOW_S
        step = max(1.0, span / MAX_WINDOWS)
        starts = t[0] + np.arange(int(span // step) + 1) * step
        counts = np.searchsorted(t, starts + WINDOW_S, side="left") - np.searchsorted(t, starts, side="left")
        window_rates = counts / WINDOW_S
        at_request = np.searchsorted(t, t + WINDOW_S, side="left") - np.arange(n)
        peak = max(float(at_request.max()) / WINDOW_S, float(window_rates.max()))
    p95, p99 = (float(x) for x in np.percentile(window_rates, [95, 99]))
    return MinuteRates(
        window_rates=window_rates,
        step_s=step,
        rates={"mean": mean, "p95_1m": p95, "p99_1m": p99, "peak_1m": peak},
    )


def describe_basis(basis: str, rates: MinuteRates) -> str:
    what = {
        "mean": "the trace's mean rate (requests ÷ duration)",
        "p95_1m": "the 95th percentile of its one-minute rates",
        "p99_1m": "the 99th percentile of its one-minute rates",
        "peak_1m": "its busiest minute",
    }[basis]
    return (
        f"arrival rate: {what}, {rates.rate(basis):.6g} req/s (basis {basis}; one-minute windows slide every "
        f"{rates.step_s:g} s; mean {rates.rates['mean']:.6g}, p95 {rates.rates['p95_1m']:.6g}, "
        f"p99 {rates.rates['p99_1m']:.6g}, peak {rates.rates['peak_1m']:.6g} req/s)"
    )
