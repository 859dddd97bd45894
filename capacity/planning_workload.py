"""Where a planning replay's requests come from (docs/planning.md).

- A trace: its own arrival times and paired lengths (its bursts are real), time-scaled only when an
  explicit mean rate is asked for.
- An envelope without a trace: an over-dispersed arrival process. Each minute's rate is drawn from a
  gamma distribution with the stated mean and coefficient of variation `minute_rate_cv` (0 = a
  steady Poisson stream), its count is Poisson at that rate and its arrivals uniform within it; the
  lengths are drawn as the KV simulation draws them. The parameter is shown in `planning_basis`.
- An entitlement's history: its recorded minutes (reconciliation builds those with `bucket_workload`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from capacity.lengths import LengthSamples, LengthSpec, cycled_indices, draw_lengths, spec_mean, stratified_uniform
from capacity.planning import FloatArray, Workload, weighted_costs
from capacity.steps import num

# The conversation trace in data/ (azure_llm_2023_conv.csv): its one-minute request counts have a
# coefficient of variation of 0.220, of which Poisson noise at its 333 a minute is 0.055, leaving a
# minute-rate CV of √(0.220² − 0.055²) = 0.21 (docs/planning.md).
DEFAULT_MINUTE_RATE_CV = 0.21
ENVELOPE_MINUTES = 60
# An envelope's replay is bounded whatever the rate: fewer minutes at very high rates, never fewer than 10.
MAX_ENVELOPE_REQUESTS = 200_000
MAX_HISTORY_REQUESTS = 200_000
_STREAM = 7  # its own seeded stream, apart from the KV simulation's


def trace_workload(
    arrival_s: npt.ArrayLike,
    prompt: npt.ArrayLike,
    output: npt.ArrayLike,
    *,
    w_out: float,
    w_cached: float = 0.0,
    cache_hit_ratio: float = 0.0,
    cancellation_ratio: float = 0.0,
    mean_rate_rps: float | None = None,
    name: str = "the trace",
) -> Workload:
    """Requests at the trace's own times; with `mean_rate_rps`, time-scaled to that mean rate (its
    burst shape kept). A cancelled request is charged half its output, as sizing counts it."""
    t = np.asarray(arrival_s, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t = t[order] - (t[order][0] if len(t) else 0.0)
    out = np.asarray(output, dtype=np.float64)[order] * (1 - cancellation_ratio / 2)
    cost = weighted_costs(
        np.asarray(prompt, dtype=np.float64)[order],
        out,
        w_out=w_out,
        w_cached=w_cached,
        cache_hit_ratio=cache_hit_ratio,
    )
    own = len(t) / max(float(t[-1]), 1.0) if len(t) else 0.0
    if mean_rate_rps is not None and mean_rate_rps > 0 and own > 0 and mean_rate_rps != own:
        scale = own / mean_rate_rps
        return Workload(
            t * scale,
            cost,
            f"{name}'s {len(t):,} requests at its own arrival times, time-scaled ×{num(scale)} from its mean "
            f"{num(own)} req/s to {num(mean_rate_rps)} req/s (burst shape kept)",
        )
    return Workload(t, cost, f"{name}'s {len(t):,} requests at their own arrival times ({num(own)} req/s mean)")


def envelope_workload(
    *,
    rate_rps: float,
    prompt: LengthSpec,
    output: LengthSpec,
    w_out: float,
    w_cached: float = 0.0,
    cache_hit_ratio: float = 0.0,
    cancellation_ratio: float = 0.0,
    minute_rate_cv: float = DEFAULT_MINUTE_RATE_CV,
    seed: int = 0,
) -> Workload:
    rng = np.random.default_rng([seed, _STREAM])
    minutes = ENVELOPE_MINUTES
    if rate_rps * 60 * minutes > MAX_ENVELOPE_REQUESTS:
        minutes = max(10, math.floor(MAX_ENVELOPE_REQUESTS / (rate_rps * 60)))
    # Past the bound even in 10 minutes, each simulated request stands for `bundle` real ones
    # (its cost multiplied): the minute-to-minute swings, not single requests, decide at such rates.
    bundle = max(1.0, rate_rps * 60 * minutes / MAX_ENVELOPE_REQUESTS)
    sim_rate = rate_rps / bundle
    if minute_rate_cv > 0:
        shape = 1 / minute_rate_cv**2
        rates = rng.gamma(shape, sim_rate / shape, minutes)
    else:
        rates = np.full(minutes, sim_rate)
    counts = rng.poisson(rates * 60)
    n = int(counts.sum())
    start = np.repeat(np.arange(minutes) * 60.0, counts)
    t = np.sort(start + rng.random(n) * 60.0)
    p = _draw(prompt, rng, n)
    o = _draw(output, rng, n) * (1 - cancellation_ratio / 2)
    cost = weighted_costs(p, o, w_out=w_out, w_cached=w_cached, cache_hit_ratio=cache_hit_ratio) * bundle
    bundled = f", each standing for {num(bundle)} requests" if bundle > 1 else ""
    return Workload(
        t,
        cost,
        f"{n:,} simulated requests{bundled} over {minutes} minutes at a mean {num(rate_rps)} req/s, each minute's "
        f"rate drawn from a gamma distribution with coefficient of variation {num(minute_rate_cv)} (editable as the minute-rate CV; "
        f"0 = steady Poisson arrivals), seed {seed}; lengths drawn through the stated quantiles and scaled to the "
        f"stated means",
    )


def _draw(spec: LengthSpec, rng: np.random.Generator, n: int) -> FloatArray:
    if n == 0:
        return np.zeros(0)
    if isinstance(spec, LengthSamples):
        return draw_lengths(spec, np.empty(0), cycled_indices(rng, len(spec.values), n))
    drawn = draw_lengths(spec, stratified_uniform(rng, n), np.empty(0, dtype=np.intp))
    # The quantile curve's own mean is not the stated one; the bucket is charged at the stated
    # mean (as the rates are), keeping the shape of the tail.
    mean = float(drawn.mean())
    return drawn * (spec_mean(spec) / mean) if mean > 0 else drawn


def bucket_workload(
    start_s: npt.ArrayLike, requests: npt.ArrayLike, wt: npt.ArrayLike, *, width_s: float = 60.0, name: str
) -> Workload:
    """An entitlement's recorded buckets (minute rollups, or hours where no minutes are kept) as
    requests: each bucket's count spread evenly over it, each request costing the bucket's mean
    weighted tokens (a rollup keeps counts and sums, not single requests)."""
    start = np.asarray(start_s, dtype=np.float64)
    count = np.asarray(requests, dtype=np.int64)
    total = np.asarray(wt, dtype=np.float64)
    keep = count > 0
    start, count, total = start[keep], count[keep], total[keep]
    order = np.argsort(start, kind="stable")
    start, count, total = start[order], count[order], total[order]
    recorded = int(count.sum())
    # Bounded work (a busy scope records millions of reservations in a 14-day window): past the bound,
    # each replayed request stands for `bundle` recorded ones of its bucket, at their summed cost. The
    # bucket's total is kept exactly; lumps need the level at once, so the answer can only err upward.
    bundle = max(1, math.ceil(recorded / MAX_HISTORY_REQUESTS))
    if bundle > 1:
        count = np.ceil(count / bundle).astype(np.int64)
    n = int(count.sum())
    each = np.repeat(count, count)
    offsets = np.arange(n) - np.repeat(np.cumsum(count) - count, count)
    t = np.repeat(start, count) + (offsets + 0.5) * width_s / np.maximum(each, 1)
    cost = np.repeat(total / np.maximum(count, 1), count)
    # Two rows of one bucket (admitted and throttled) interleave in time.
    by_time = np.argsort(t, kind="stable")
    t, cost = t[by_time], cost[by_time]
    unit = "minute" if width_s == 60 else f"{num(width_s)} s bucket"
    bundled = (
        f" (replayed as {n:,} requests, each standing for up to {bundle:,} of its {unit}'s at their summed cost)"
        if bundle > 1
        else ""
    )
    return Workload(
        t,
        cost,
        f"{name}: {recorded:,} recorded reservations in {len(start):,} {unit}s{bundled}, each {unit}'s spread "
        f"evenly over it at its mean weighted tokens",
    )
