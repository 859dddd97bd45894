"""Where a planning replay's requests come from (docs/planning.md).

- A trace: its own arrival times and paired lengths (its bursts are real), time-scaled only when an
  explicit mean rate is asked for.
- An envelope without a trace: an over-dispersed arrival process. Each minute's rate is lognormal
  with the stated mean and coefficient of variation `minute_rate_cv` (0 = a steady Poisson stream),
  its count is Poisson at that rate and its arrivals uniform within it; the lengths are drawn through
  the stated quantiles (or resampled from observed values). The parameter is shown in `planning_basis`.

  Common random numbers: two CVs (or two rates) are compared on the same random world, so a burstier
  envelope never looks calmer by sampling luck. Every number is a counter-based uniform of (draw,
  component, minute, slot) (`uniforms`), so no draw shifts another's and many draws are generated at
  once (capacity.realisations answers across 64 of them):
  * minute rates by inversion of one fixed standard normal z per minute:
    rate·exp(σz − σ²/2), σ² = ln(1 + cv²), exactly mean `rate` and CV `cv`; a larger CV moves every
    minute with z > σ further up (the busy minutes, which decide the CU);
  * counts by inversion of one fixed uniform per minute against the Poisson CDF, so a higher minute
    rate never gives a smaller count;
  * arrival offsets and lengths per (minute, slot), so a minute with one more request keeps its first
    requests' times and lengths and adds one. Lengths are scaled by the quantile curve's own mean (a
    fixed grid), not the drawn one, so no request's cost depends on how many others were drawn.
- An entitlement's history: its recorded minutes (reconciliation builds those with `bucket_workload`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt

from capacity.lengths import LengthSamples, LengthSpec, draw_lengths, normal_ppf, spec_mean
from capacity.minute_cv import catalogue_cv
from capacity.planning import FloatArray, Workload, weighted_costs
from capacity.steps import num

# The catalogue's conversation default (data/workload_cv.csv, measured by capacity.minute_cv): 0.21.
# A caller with a tenant asks telemetry.minute_cv.envelope_cv, which prefers what the tenant recorded.
DEFAULT_MINUTE_RATE_CV = catalogue_cv().minute_rate_cv
ENVELOPE_MINUTES = 60
# An envelope's replay is bounded whatever the rate: past this many requests in a draw, bundles.
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
    """One draw (realisation `seed`) of the envelope; `envelope_workloads` draws many at once."""
    return envelope_workloads(
        range(seed, seed + 1),
        rate_rps=rate_rps,
        prompt=prompt,
        output=output,
        w_out=w_out,
        w_cached=w_cached,
        cache_hit_ratio=cache_hit_ratio,
        cancellation_ratio=cancellation_ratio,
        minute_rate_cv=minute_rate_cv,
    )[0]


def envelope_minutes(rate_rps: float, per_draw: int = MAX_ENVELOPE_REQUESTS) -> tuple[int, float]:
    """How many minutes a draw spans (always an hour: a shorter draw would count the bucket's prepaid
    first minute as a larger share of it) and how many real requests each simulated one stands for,
    so a draw stays under `per_draw` requests. A bundle is charged its requests' summed cost at once:
    its Poisson noise is coarser than the real stream's, so bundling can only ask more CU."""
    minutes = ENVELOPE_MINUTES
    return minutes, max(1.0, rate_rps * 60 * minutes / per_draw)


def envelope_workloads(
    seeds: Iterable[int],
    *,
    rate_rps: float,
    prompt: LengthSpec,
    output: LengthSpec,
    w_out: float,
    w_cached: float = 0.0,
    cache_hit_ratio: float = 0.0,
    cancellation_ratio: float = 0.0,
    minute_rate_cv: float = DEFAULT_MINUTE_RATE_CV,
    per_draw: int = MAX_ENVELOPE_REQUESTS,
) -> list[Workload]:
    """Independent draws of the envelope, one per seed, all generated in a few array operations.

    Every random number is a counter-based uniform of (seed, component, minute, slot) (`uniforms`),
    so draw k is the same whichever other draws are asked with it, a minute with one more request
    keeps its first requests' times and lengths, and two rates or CVs are compared on the same world.
    """
    seeds = np.asarray(list(seeds), dtype=np.uint64)
    k = len(seeds)
    minutes, bundle = envelope_minutes(rate_rps, per_draw)
    sim_rate = rate_rps / bundle
    grid_seed = np.repeat(seeds, minutes)
    grid_minute = np.tile(np.arange(minutes, dtype=np.uint64), k)
    z = normal_ppf(uniforms(grid_seed, _MINUTES, grid_minute, 0))
    if minute_rate_cv > 0:
        sigma = math.sqrt(math.log1p(minute_rate_cv**2))
        rates = sim_rate * np.exp(sigma * z - sigma**2 / 2)
    else:
        rates = np.full(len(z), sim_rate)
    # Poisson counts by inversion of one fixed uniform per minute: a higher rate never gives fewer.
    from scipy.stats import poisson  # on use: the web process imports this module, and scipy is heavy

    lam = rates * 60
    u_count = uniforms(grid_seed, _COUNTS, grid_minute, 0)
    counts = np.where(lam > 0, poisson.ppf(u_count, np.maximum(lam, 1e-300)), 0).astype(np.int64)
    total = int(counts.sum())
    cell = np.repeat(np.arange(len(counts)), counts)
    slot = (np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)).astype(np.uint64)
    m = grid_minute[cell]
    offset = _slot_uniforms(cell_keys(grid_seed, _TIMES, grid_minute)[cell], slot)
    t = m.astype(np.float64) * 60.0 + offset * 60.0
    p = _lengths(prompt, _slot_uniforms(cell_keys(grid_seed, _PROMPT, grid_minute)[cell], slot)) * _scale(prompt)
    o = _lengths(output, _slot_uniforms(cell_keys(grid_seed, _OUTPUT, grid_minute)[cell], slot))
    o = o * _scale(output) * (1 - cancellation_ratio / 2)
    cost = weighted_costs(p, o, w_out=w_out, w_cached=w_cached, cache_hit_ratio=cache_hit_ratio) * bundle
    # Cells run in (draw, minute) order already: sorting within each is sorting on cell + offset.
    order = np.argsort(cell + offset)
    t, cost = t[order], cost[order]
    cuts = np.searchsorted(cell[order], np.arange(1, k) * minutes)
    bundled = f", each standing for {num(bundle)} requests" if bundle > 1 else ""
    out = []
    for seed, tk, ck in zip(seeds.tolist(), np.split(t, cuts), np.split(cost, cuts), strict=True):
        out.append(
            Workload(
                tk,
                ck,
                f"{len(tk):,} simulated requests{bundled} over {minutes} minutes at a mean {num(rate_rps)} req/s, "
                f"each minute's rate drawn from a lognormal distribution with coefficient of variation "
                f"{num(minute_rate_cv)} (editable as the minute-rate CV; 0 = steady Poisson arrivals), draw {seed}; "
                f"lengths drawn through the stated quantiles and scaled to the stated means",
            )
        )
    return out


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """splitmix64's finaliser: a bijection of 64-bit words whose outputs look independent."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def cell_keys(seed: npt.ArrayLike, component: int, minute: npt.ArrayLike) -> npt.NDArray[np.uint64]:
    """The hash of (seed, component, minute): one per minute of a draw, shared by its slots."""
    with np.errstate(over="ignore"):
        x = _mix(np.asarray(seed, dtype=np.uint64) * _GOLDEN + np.uint64(_STREAM * 8 + component))
        return _mix(x + np.asarray(minute, dtype=np.uint64) * _GOLDEN)


def _slot_uniforms(key: npt.NDArray[np.uint64], slot: npt.ArrayLike) -> FloatArray:
    with np.errstate(over="ignore"):
        x = _mix(key + np.asarray(slot, dtype=np.uint64) * _GOLDEN + _GOLDEN)
    return ((x >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def uniforms(seed: npt.ArrayLike, component: int, minute: npt.ArrayLike, slot: npt.ArrayLike) -> FloatArray:
    """A uniform in (0, 1) for each (seed, component, minute, slot), the same whatever else is drawn
    (a counter-based generator: the numbers are a hash of their coordinates, not a stream's next)."""
    return _slot_uniforms(cell_keys(seed, component, minute), slot)


def _lengths(spec: LengthSpec, u: FloatArray) -> FloatArray:
    if isinstance(spec, LengthSamples):
        n = len(spec.values)
        return draw_lengths(spec, np.empty(0), np.minimum((u * n).astype(np.intp), n - 1))
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
