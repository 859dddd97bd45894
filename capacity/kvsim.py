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
    base_kv, base_n, w_end, w_kv = _wrapped(end, kv_tokens, period)
    s_time = np.concatenate((np.zeros(len(w_end)), start))
    s_kv = np.concatenate((w_kv, kv_tokens))
    e_time = np.concatenate((w_end, end))
    e_kv = np.concatenate((w_kv, kv_tokens))
    inside = e_time < period
    times = np.concatenate(([0.0], s_time, e_time[inside]))
    order = np.argsort(times, kind="stable")
    t = times[order]
    kv_level = np.cumsum(np.concatenate(([base_kv], s_kv, -e_kv[inside]))[order])
    req_level = np.cumsum(
        np.concatenate(([base_n], np.ones(len(s_time), np.int64), -np.ones(int(inside.sum()), np.int64)))[order]
    )
    duration = np.diff(np.append(t, period))
    total = float(duration.sum())
    by_kv = np.argsort(kv_level)
    kv_sorted = kv_level[by_kv]
    cum_w = np.cumsum(duration[by_kv])
    # Events at the same instant pass through levels that last no time; they are not "observed".
    kv_max = float(kv_level[duration > 0].max(initial=0.0))
    edges = np.linspace(0.0, max(kv_max, 1.0), bins + 1)
    at_edge = np.searchsorted(kv_sorted, edges[1:], side="right")
    cum_at_edge = np.where(at_edge > 0, cum_w[np.maximum(at_edge - 1, 0)], 0.0)
    time_in_bin = np.diff(np.concatenate(([0.0], cum_at_edge)))
    # Ties may sort an end before its start: that dip below zero lasts no time, so clip it.
    # (A weighted quantile, not a bincount: the level can be billions when the rate is huge.)
    req_f = np.maximum(req_level, 0).astype(np.float64)
    return KvSimulation(
        source=source,
        requests=n,
        period_s=period,
        mean_concurrency=float(np.sum(req_f * duration)) / total,
        concurrency_p99=weighted_quantile(req_f, duration, 0.99),
        mean_residence_s=float(residence_s.mean()),
        kv_tokens_mean=float(np.sum(kv_level * duration)) / total,
        kv_tokens_p50=_quantile_sorted(kv_sorted, cum_w, 0.50),
        kv_tokens_p99=_quantile_sorted(kv_sorted, cum_w, 0.99),
        kv_tokens_max=kv_max,
        largest_request_kv_tokens=float(kv_tokens.max()),
        hist_edges=edges,
        hist_time_fraction=time_in_bin / total,
    )


def _wrapped(end: FloatArray, kv: FloatArray, period: float) -> tuple[float, int, FloatArray, FloatArray]:
    """Requests still running past the period wrap to its start, as often as they last.

    Copy j ≥ 1 of a request covers [0, end − j·period) while that is positive. Copies that span the
    whole period only lift the level by a constant, so they are summed (`base_kv`, `base_n`); each
    request has at most one partial copy, which enters at 0 and ends inside the period. That keeps
    the work O(n) whatever the rate: at 1e9 requests/s a 10 s request wraps 5e8 times, and walking
    those copies one by one is what used to exhaust memory.
    """
    k = np.maximum(np.ceil(end / period) - 1, 0)
    e = end - k * period
    # Guard the rounding of end ÷ period: the partial copy must end in (0, period].
    over = e > period
    k, e = np.where(over, k + 1, k), np.where(over, e - period, e)
    under = (e <= 0) & (k > 0)
    k, e = np.where(under, k - 1, k), np.where(under, e + period, e)
    partial = (k >= 1) & (e < period)
    full = k - partial
    base_kv = float(np.sum(full * kv))
    base_n = int(np.sum(full))
    return base_kv, base_n, e[partial], kv[partial]
