"""Where a planning replay's requests come from (docs/planning.md).

- A trace: its own arrival times and paired lengths (its bursts are real), time-scaled only when an
  explicit mean rate is asked for.
- An envelope without a trace: an over-dispersed arrival process. Each minute's rate is lognormal
  with the stated mean and coefficient of variation `minute_rate_cv` (0 = a steady Poisson stream),
  its count is Poisson at that rate and its arrivals uniform within it; the lengths are drawn through
  the stated quantiles (or resampled from observed values). The parameter is shown in `planning_basis`.

  Common random numbers: two CVs (or two rates) are compared on the same random world, so a burstier
  envelope never looks calmer by sampling luck. Each component has its own child stream,
  `default_rng([seed, _STREAM, k, ...])`, so no draw shifts another's:
  * minute rates by inversion of one fixed standard normal z per minute:
    rate·exp(σz − σ²/2), σ² = ln(1 + cv²), exactly mean `rate` and CV `cv`; a larger CV moves every
    minute with z > σ further up (the busy minutes, which decide the CU);
  * counts by inversion of one fixed uniform per minute against the Poisson CDF (summed pmf terms over
    the ±12 sd window, numpy only), so a higher minute rate never gives a smaller count;
  * arrival offsets and lengths per (minute, slot) from per-minute streams, read as prefixes: a minute
    with one more request keeps its first requests' times and lengths and adds one. Lengths are
    stratified in blocks of 64 within a minute and scaled by the quantile curve's own mean (a fixed
    grid), not the drawn one, so no request's cost depends on how many others were drawn.
- An entitlement's history: its recorded minutes (reconciliation builds those with `bucket_workload`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from capacity.lengths import LengthSamples, LengthSpec, draw_lengths, spec_mean
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
# Child streams of an envelope, one per component (common random numbers, module docstring).
_MINUTES, _COUNTS, _TIMES, _PROMPT, _OUTPUT = range(5)


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
    minutes = ENVELOPE_MINUTES
    if rate_rps * 60 * minutes > MAX_ENVELOPE_REQUESTS:
        minutes = max(10, math.floor(MAX_ENVELOPE_REQUESTS / (rate_rps * 60)))
    # Past the bound even in 10 minutes, each simulated request stands for `bundle` real ones
    # (its cost multiplied): the minute-to-minute swings, not single requests, decide at such rates.
    bundle = max(1.0, rate_rps * 60 * minutes / MAX_ENVELOPE_REQUESTS)
    sim_rate = rate_rps / bundle
    z = np.random.default_rng([seed, _STREAM, _MINUTES]).standard_normal(minutes)
    if minute_rate_cv > 0:
        sigma = math.sqrt(math.log1p(minute_rate_cv**2))
        rates = sim_rate * np.exp(sigma * z - sigma**2 / 2)
    else:
        rates = np.full(minutes, sim_rate)
    u_count = np.random.default_rng([seed, _STREAM, _COUNTS]).random(minutes)
    counts = [_poisson_inverse(float(lam), float(u)) for lam, u in zip(rates * 60, u_count, strict=True)]
    n = int(sum(counts))
    p_scale = _scale(prompt)
    o_scale = _scale(output)
    t_parts, p_parts, o_parts = [], [], []
    for i, c in enumerate(counts):
        if c == 0:
            continue
        t_parts.append(i * 60.0 + np.random.default_rng([seed, _STREAM, _TIMES, i]).random(c) * 60.0)
        p_parts.append(_minute_lengths(prompt, np.random.default_rng([seed, _STREAM, _PROMPT, i]), c))
        o_parts.append(_minute_lengths(output, np.random.default_rng([seed, _STREAM, _OUTPUT, i]), c))
    if n:
        t = np.concatenate(t_parts)
        order = np.argsort(t, kind="stable")
        t = t[order]
        p = np.concatenate(p_parts)[order] * p_scale
        o = np.concatenate(o_parts)[order] * o_scale * (1 - cancellation_ratio / 2)
    else:
        t, p, o = np.zeros(0), np.zeros(0), np.zeros(0)
    cost = weighted_costs(p, o, w_out=w_out, w_cached=w_cached, cache_hit_ratio=cache_hit_ratio) * bundle
    bundled = f", each standing for {num(bundle)} requests" if bundle > 1 else ""
    return Workload(
        t,
        cost,
        f"{n:,} simulated requests{bundled} over {minutes} minutes at a mean {num(rate_rps)} req/s, each minute's "
        f"rate drawn from a lognormal distribution with coefficient of variation {num(minute_rate_cv)} (editable as the minute-rate CV; "
        f"0 = steady Poisson arrivals), seed {seed}; lengths drawn through the stated quantiles and scaled to the "
        f"stated means",
    )


def _poisson_inverse(lam: float, u: float) -> int:
    """The Poisson(lam) quantile at u: the least k with CDF(k) ≥ u. For a fixed u it never falls as lam
    rises (the CDF at every k falls with lam). The pmf is summed over lam ± 12 sd (+12), in logs relative
    to the mode, so large counts neither underflow nor need scipy; the mass outside is below 1e-30."""
    if lam <= 0:
        return 0
    spread = 12 * math.sqrt(lam) + 12
    mode = math.floor(lam)
    lo = max(0, math.floor(lam - spread))
    hi = math.ceil(lam + spread)
    ks = np.arange(lo, hi + 1, dtype=np.float64)
    # log p(k) − log p(mode): sums of log(lam / j) stepping up from the mode, minus them stepping down.
    up = np.cumsum(np.log(lam / ks[ks > mode]))
    # k below the mode subtracts log(lam / j) for j in (k, mode]; the mode itself is 0.
    down = -np.cumsum(np.log(lam / ks[(ks > lo) & (ks <= mode)])[::-1])[::-1]
    logp = np.concatenate([down, [0.0], up])
    cdf = np.cumsum(np.exp(logp))
    return lo + int(np.searchsorted(cdf, u * cdf[-1], side="left"))


_BLOCK = 64


def _minute_uniforms(rng: np.random.Generator, n: int) -> FloatArray:
    """n uniforms stratified in blocks of 64 (one draw in each 1/64 slice of a block, shuffled),
    row by row from the stream: the first n are the same whatever larger n is asked."""
    blocks = -(-n // _BLOCK)
    raw = rng.random((blocks, 2 * _BLOCK))
    u: FloatArray = ((np.argsort(raw[:, :_BLOCK], axis=1) + raw[:, _BLOCK:]) / _BLOCK).ravel()[:n]
    return u


def _minute_lengths(spec: LengthSpec, rng: np.random.Generator, n: int) -> FloatArray:
    u = _minute_uniforms(rng, n)
    if isinstance(spec, LengthSamples):
        k = len(spec.values)
        idx = np.minimum((u * k).astype(np.intp), k - 1)
        return draw_lengths(spec, np.empty(0), idx)
    return draw_lengths(spec, u, np.empty(0, dtype=np.intp))


def _scale(spec: LengthSpec) -> float:
    """Quantile lengths are charged at the stated mean (as the rates are), keeping the tail's shape: the
    curve's own mean, taken on a fixed fine grid, is scaled to it. Observed values are used as they are."""
    if isinstance(spec, LengthSamples):
        return 1.0
    grid = draw_lengths(spec, (np.arange(_GRID) + 0.5) / _GRID, np.empty(0, dtype=np.intp))
    mean = float(grid.mean())
    return spec_mean(spec) / mean if mean > 0 else 1.0


_GRID = 1 << 14


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
