"""Concurrent KV tokens over time, by a sweep line over request start and end events.

The arrivals are replayed on a circle: a request still running at the end of the period wraps to
its start. That gives a stationary picture with no empty warm-up to discard, and the time-average
of requests in flight equals Σ residence ÷ period exactly, so Little's law can be checked.

Monotonicity comes from the construction: arrivals are positions on a fixed axis (from one
exponential draw, or a trace's own timestamps) scaled to seconds by 1 / rate. A higher rate
compresses the same arrivals; every request that overlaps a given point of the axis still does,
and more may, so the concurrent-KV curve can only rise point by point — and so can any
time-weighted percentile of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Source = Literal["poisson", "trace", "none"]


@dataclass(frozen=True, eq=False)
class KvSimulation:
    """Time-weighted statistics of the simulated concurrent KV tokens (and requests in flight).

    `hist_edges` (bins + 1) and `hist_time_fraction` (bins, sums to 1) chart the share of time
    spent at each level of concurrent KV tokens.
    """

    source: Source
    requests: int
    period_s: float
    mean_concurrency: float
    concurrency_p99: float
    mean_residence_s: float
    kv_tokens_mean: float
    kv_tokens_p50: float
    kv_tokens_p99: float
    kv_tokens_max: float
    largest_request_kv_tokens: float
    hist_edges: FloatArray
    hist_time_fraction: FloatArray

    def to_dict(self) -> dict[str, object]:
        return {
            "source": self.source,
            "requests": self.requests,
            "period_s": self.period_s,
            "mean_concurrency": self.mean_concurrency,
            "concurrency_p99": self.concurrency_p99,
            "mean_residence_s": self.mean_residence_s,
            "kv_tokens_mean": self.kv_tokens_mean,
            "kv_tokens_p50": self.kv_tokens_p50,
            "kv_tokens_p99": self.kv_tokens_p99,
            "kv_tokens_max": self.kv_tokens_max,
            "largest_request_kv_tokens": self.largest_request_kv_tokens,
            "histogram": {
                "bin_edges": [float(x) for x in self.hist_edges],
                "time_fraction": [float(x) for x in self.hist_time_fraction],
            },
        }


EMPTY = KvSimulation("none", 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, np.zeros(2), np.zeros(1))


def poisson_axis(rng: np.random.Generator, n: int) -> FloatArray:
    """n arrival positions on a circle of circumference n (mean gap 1), from exponential gaps.

    Normalising the total to exactly n makes the replayed rate exactly the requested one, so the
    simulation's mean concurrency equals rate × mean residence instead of wandering by 1/√n.
    """
    cum = np.cumsum(rng.exponential(size=n))
    axis: FloatArray = cum * (n / cum[-1])
    return axis


def weighted_quantile(levels: FloatArray, weights: FloatArray, q: float) -> float:
    """Smallest level whose share of total weight at or below it reaches q."""
    order = np.argsort(levels)
    return _quantile_sorted(levels[order], np.cumsum(weights[order]), q)


def _quantile_sorted(sorted_levels: FloatArray, cum_weights: FloatArray, q: float) -> float:
    i = int(np.searchsorted(cum_weights, q * cum_weights[-1], side="left"))
    return float(sorted_levels[min(i, len(sorted_levels) - 1)])


def simulate(
    axis: FloatArray,
    period_axis: float,
    seconds_per_axis_unit: float,
    residence_s: FloatArray,
    kv_tokens: FloatArray,
    *,
    source: Source,
    bins: int = 40,
) -> KvSimulation:
    """Replay requests starting at `axis × seconds_per_axis_unit` on a circle of the period.

    A request holds `kv_tokens` for its whole residence (the caller decides what that is).
    Events at the same instant may be taken in any order: the levels between them last no time.
    KV token counts are whole (or halves, for cancelled output), so the running sums are exact.
    """
    n = len(axis)
    if n == 0 or period_axis <= 0:
        return EMPTY
    period = period_axis * seconds_per_axis_unit
    start = np.mod(axis, period_axis) * seconds_per_axis_unit
    if np.any(start[1:] < start[:-1]):
        order = np.argsort(start, kind="stable")
        start, residence_s, kv_tokens = start[order], residence_s[order], kv_tokens[order]
    end = start + residence_s
    t, kv_level, req_level = _sweep(start, end, kv_tokens, period)
    duration = np.diff(np.append(t, period))
    total = float(duration.sum())
    kv_time = _LevelTime.of(kv_level, duration)
    # Events at the same instant pass through levels that last no time; they are not "observed".
    kv_max = float(kv_level[duration > 0].max(initial=0.0))
    edges = np.linspace(0.0, max(kv_max, 1.0), bins + 1)
    time_in_bin = np.diff(np.concatenate(([0.0], kv_time.at_or_below(edges[1:]))))
    # Ties may sort an end before its start: that dip below zero lasts no time, so clip it.
    req_clipped = np.maximum(req_level, 0)
    req_f = req_clipped.astype(np.float64)
    return KvSimulation(
        source=source,
        requests=n,
        period_s=period,
        mean_concurrency=float(np.sum(req_f * duration)) / total,
        concurrency_p99=_count_quantile(req_clipped, duration, 0.99),
        mean_residence_s=float(residence_s.mean()),
        kv_tokens_mean=float(np.sum(kv_level * duration)) / total,
        kv_tokens_p50=kv_time.quantile(0.50),
        kv_tokens_p99=kv_time.quantile(0.99),
        kv_tokens_max=kv_max,
        largest_request_kv_tokens=float(kv_tokens.max()),
        hist_edges=edges,
        hist_time_fraction=time_in_bin / total,
    )


def _sweep(
    start: FloatArray, end: FloatArray, kv_tokens: FloatArray, period: float
) -> tuple[FloatArray, FloatArray, npt.NDArray[np.int64]]:
    """Event times in order, with the KV tokens and the requests in flight from each event on.

    The events are the period's start (the wrapped base), the wrapped copies' starts at 0, the
    requests' starts, then the ends inside the period (wrapped copies' first), taken in the stable
    order of their times: at equal times, in that listing order. The starts are already in order, so
    only the ends are sorted — bucketed first by a linear radix pass, which leaves them nearly
    sorted for the stable sort — and then merged with the starts.
    """
    base_kv, base_n, w_end, w_kv = _wrapped(end, kv_tokens, period)
    # A copy that lasts the whole period (none from _wrapped, which sums those) starts and never ends.
    w_inside, inside = w_end < period, end < period
    s_time = np.concatenate(([0.0], np.zeros(len(w_end)), start))
    e_time = np.concatenate((w_end[w_inside], end[inside]))
    e_order = _stable_order(e_time)
    times = np.concatenate((s_time, e_time[e_order]))
    # Two sorted runs: the stable sort merges them in one linear pass, starts first at equal times.
    order = np.argsort(times, kind="stable")
    e_kv = np.concatenate((w_kv[w_inside], kv_tokens[inside]))[e_order]
    kv_level = np.cumsum(np.concatenate(([base_kv], w_kv, kv_tokens, -e_kv))[order])
    req_level = np.cumsum(
        np.concatenate(([base_n], np.ones(len(s_time) - 1, np.int64), -np.ones(len(e_time), np.int64)))[order]
    )
    return times[order], kv_level, req_level


@dataclass(frozen=True, eq=False)
class _LevelTime:
    """The time spent at or below each KV level, for its quantiles and histogram.

    KV levels are whole or half tokens, so when they span not many more half tokens than there are
    events, the time at each is summed by a bincount over half tokens (`lowest` is the first slot's
    level, in half tokens): linear in the events. Otherwise (or should a level not be a half token)
    they are sorted, an n·log n step that grew faster than the trace (issue 35.5). The two sum the
    same times in another order, so a histogram fraction may move in its last bits (≈1e-16 of the
    total), never a level: the quantiles and every other figure are the same bit for bit.
    """

    levels: FloatArray | None  # sorted levels; None when `cum` is by half-token slot from `lowest`
    cum: FloatArray
    lowest: float = 0.0

    @classmethod
    def of(cls, levels: FloatArray, weights: FloatArray) -> _LevelTime:
        half = levels * 2.0
        lo, hi = float(half.min()), float(half.max())
        span = hi - lo + 1
        if span <= _HALF_TOKENS_PER_EVENT * len(levels) + 4096 and np.array_equal(half, np.floor(half)):
            slots = (half - lo).astype(np.intp)
            return cls(None, np.cumsum(np.bincount(slots, weights=weights, minlength=int(span))), lo)
        order = np.argsort(levels)
        return cls(levels[order], np.cumsum(weights[order]))

    def quantile(self, q: float) -> float:
        if self.levels is not None:
            return _quantile_sorted(self.levels, self.cum, q)
        i = int(np.searchsorted(self.cum, q * self.cum[-1], side="left"))
        return (self.lowest + min(i, len(self.cum) - 1)) / 2.0

    def at_or_below(self, x: FloatArray) -> FloatArray:
        """The time at levels ≤ each of `x`."""
        if self.levels is not None:
            n = np.searchsorted(self.levels, x, side="right")
        else:
            n = np.clip(np.floor(x * 2.0) - self.lowest + 1, 0, len(self.cum)).astype(np.intp)
        at: FloatArray = np.where(n > 0, self.cum[np.maximum(n - 1, 0)], 0.0)
        return at


# Past this many half-token slots per event, the bincount's pass over the slots costs more than
# sorting the events (measured on the conversation trace, whose KV levels span 23 slots per event
# at 1× — sorted, in 15 ms per three replays against 22 — and 2.3 at 10× — counted, 126 against 232).
_HALF_TOKENS_PER_EVENT = 8


_BUCKETS = 1 << 16


def _stable_order(x: FloatArray) -> npt.NDArray[np.intp]:
    """`np.argsort(x, kind="stable")`, faster on many values: first by a 16-bit bucket of the value
    (a linear radix sort, stable), then stably by the value itself, which the buckets leave nearly
    sorted. Equal values share a bucket and the buckets rise with the value, so the order is the same."""
    if len(x) < 4096:
        return np.argsort(x, kind="stable")
    lo, hi = float(x.min()), float(x.max())
    scale = (_BUCKETS - 1) / (hi - lo) if hi > lo else 0.0
    if not 0.0 < scale < math.inf:
        return np.argsort(x, kind="stable")
    bucket = np.minimum((x - lo) * scale, _BUCKETS - 1).astype(np.uint16)
    by_bucket = np.argsort(bucket, kind="stable")
    within = np.argsort(x[by_bucket], kind="stable")
    order: npt.NDArray[np.intp] = by_bucket[within]
    return order


def _count_quantile(levels: npt.NDArray[np.int64], weights: FloatArray, q: float) -> float:
    """`weighted_quantile` for whole non-negative levels, in linear time: the weight at each level by
    a bincount (the levels of a sweep move by one request per event, so they span at most the
    number of events); a sort when they span more than a few times the count."""
    lo = int(levels.min())
    span = int(levels.max()) - lo + 1
    if span > 4 * len(levels) + 1024:
        return weighted_quantile(levels.astype(np.float64), weights, q)
    cum = np.cumsum(np.bincount(levels - lo, weights=weights, minlength=span))
    i = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(lo + min(i, span - 1))


def _wrapped(end: FloatArray, kv: FloatArray, period: float) -> tuple[float, int, FloatArray, FloatArray]:
    """Requests still running past the period wrap to its start, as often as they last.

    Copy j ≥ 1 of a request covers [0, end − j·period) while that is positive. Copies that span the
    whole period only lift the level by a constant, so they are summed (`base_kv`, `base_n`); each
    request has at most one partial copy, which enters at 0 and ends inside the period. That keeps
    the work O(n) whatever the rate: at 1e9 requests/s a 10 s request wraps 5e8 times, and walking
    those copies one by one is what used to exhaust memory.
    """
    # Only requests ending past the period wrap (the others have no copy), so only they are walked.
    past = np.flatnonzero(end > period)
    end, kv_past = end[past], kv[past]
    k = np.maximum(np.ceil(end / period) - 1, 0)
    e = end - k * period
    # Guard the rounding of end ÷ period: the partial copy must end in (0, period].
    over = e > period
    k, e = np.where(over, k + 1, k), np.where(over, e - period, e)
    under = (e <= 0) & (k > 0)
    k, e = np.where(under, k - 1, k), np.where(under, e + period, e)
    partial = (k >= 1) & (e < period)
    full = k - partial
    base_kv, base_n = 0.0, 0
    if np.any(full):
        # Summed over all requests (0 for those that do not wrap), so the float sum is the same
        # whichever requests wrap.
        spread = np.zeros(len(kv))
        spread[past] = full * kv_past
        base_kv = float(np.sum(spread))
        spread[past] = full
        base_n = int(np.sum(spread))
    return base_kv, base_n, e[partial], kv_past[partial]
