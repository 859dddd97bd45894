"""Turn a request class into simulated requests (arrival, KV tokens, residence) for kvsim.

Every random draw comes from its own seeded stream, so changing one input (say the cancellation
ratio) leaves the other draws alone, and two sizings that differ only in rate or lengths see the
same requests — the common random numbers the monotonicity rules rely on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from capacity.kvsim import EMPTY, FloatArray, KvSimulation, poisson_axis, simulate
from capacity.lengths import (
    Z99,
    LengthQuantiles,
    LengthSamples,
    LengthSpec,
    cycled_indices,
    draw_lengths,
    spec_mean,
    stratified_uniform,
)
from capacity.ranges import MAX_SIM_REQUESTS
from capacity.sizing_inputs import SizingInput
from capacity.steps import num

_ARRIVALS, _PROMPT, _OUTPUT, _CANCEL = 0, 1, 2, 3
# Past this many requests in flight per simulated request, n requests on a circle shorter than a
# residence cannot show the spread of a busy system (the count in flight varies by at most one per
# simulated request, where a Poisson system varies by √concurrency), so the closed form takes over.
CLOSED_FORM_CONCURRENCY_PER_REQUEST = 0.1
# Below this many in flight the replay is kept as it is (a small replayed trace is exact as given).
CLOSED_FORM_MIN_CONCURRENCY = 1000.0


@dataclass(frozen=True, eq=False)
class KvDemand:
    """`context_exceeded` of `requests` simulated requests needed more than the context (prompt + output)."""

    sim: KvSimulation
    assumptions: tuple[str, ...]
    context_exceeded: int = 0
    requests: int = 0


def paired(inp: SizingInput) -> bool:
    p, o = inp.prompt_tokens, inp.output_tokens
    return isinstance(p, LengthSamples) and isinstance(o, LengthSamples) and len(p.values) == len(o.values)


def _lengths(spec: LengthSpec, rng: np.random.Generator, n: int, order: np.ndarray | None) -> FloatArray:
    if isinstance(spec, LengthSamples):
        idx = order if order is not None else cycled_indices(rng, len(spec.values), n)
        return draw_lengths(spec, np.empty(0), idx)
    return draw_lengths(spec, stratified_uniform(rng, n), np.empty(0, dtype=np.intp))


def _describe(spec: LengthSpec, name: str, drawn: FloatArray) -> str | None:
    if not isinstance(spec, LengthQuantiles):
        return None
    return (
        f"{name}: simulated from a distribution through the stated p50 {num(spec.p50)}, p95 {num(spec.p95)} and "
        f"p99 {num(spec.p99)} (linear from 0 to p50 below the median, lognormal segments between the stated "
        f"quantiles, held at p99 above it: no extrapolation); its mean {num(float(drawn.mean()))} differs from the "
        f"stated mean {num(spec.mean)}, which the rates use"
    )


def simulate_class(inp: SizingInput, ttft_s: float, tpot_s: float) -> KvDemand:
    """Concurrent KV tokens of the class at its arrival rate (see kvsim for the replay)."""
    notes: list[str] = []
    if inp.arrival_rate_rps == 0:
        return KvDemand(EMPTY, ("KV: no arrivals, so no KV is held",))
    times = inp.arrival_times_s
    n = len(times) if times is not None else inp.sim_requests
    order = np.argsort(times, kind="stable") if times is not None else None
    if order is not None and n > MAX_SIM_REQUESTS:
        # Every k-th request in time order: the thinned trace keeps the original's burst shape
        # (its busy minutes stay busy in proportion), and the time-scaling below restores the rate.
        order = order[np.linspace(0, n - 1, MAX_SIM_REQUESTS).round().astype(np.intp)]
        notes.append(
            f"KV: the trace's {n:,} requests are more than one simulation replays ({MAX_SIM_REQUESTS:,}); "
            f"it replays {MAX_SIM_REQUESTS:,} of them, evenly spaced in time order"
        )
        n = MAX_SIM_REQUESTS
    rng = {k: np.random.default_rng([inp.seed, k]) for k in (_ARRIVALS, _PROMPT, _OUTPUT, _CANCEL)}
    if paired(inp) and order is None:
        assert isinstance(inp.prompt_tokens, LengthSamples)
        order = cycled_indices(rng[_PROMPT], len(inp.prompt_tokens.values), n)
    prompt = _lengths(inp.prompt_tokens, rng[_PROMPT], n, order)
    output = _lengths(inp.output_tokens, rng[_OUTPUT], n, order)
    if paired(inp):
        notes.append("lengths: prompt and output samples are paired by request (their joint distribution is kept)")
    else:
        notes.append("lengths: prompt and output drawn independently (no paired samples given)")
    for spec, name, drawn in (
        (inp.prompt_tokens, "prompt_tokens", prompt),
        (inp.output_tokens, "output_tokens", output),
    ):
        text = _describe(spec, name, drawn)
        if text:
            notes.append(text)
        capped = int(np.count_nonzero(drawn > inp.model.context_length))
        if capped:
            notes.append(
                f"{name}: {capped:,} of {n:,} simulated lengths above the context length {inp.model.context_length:,} "
                f"were capped at it"
            )
    ctx = float(inp.model.context_length)
    exceeded = int(np.count_nonzero(prompt + output > ctx))
    prompt = np.minimum(prompt, ctx)
    output = np.minimum(output, ctx)
    if inp.cancellation_ratio > 0:
        cancelled = stratified_uniform(rng[_CANCEL], n) < inp.cancellation_ratio
        output = np.where(cancelled, output * 0.5, output)
    kv = prompt + output
    residence = ttft_s + output * tpot_s
    rate = inp.arrival_rate_rps
    if times is not None:
        assert order is not None
        t = times[order]
        axis = t - t[0]
        # One mean gap closes the circle, so evenly spaced arrivals stay evenly spaced across the wrap.
        period = float(axis[-1]) * n / (n - 1)
        trace_rate = n / period
        if inp.trace_own_timing:
            # The trace's bursts are already in its times: scaling it up to a busy-minute rate
            # would count the burst twice (docs/planning.md). A thinned trace is scaled back to
            # the whole trace's own rate only.
            whole = len(times)
            rate = whole / (float(times.max() - times.min()) * whole / (whole - 1))
            scale = trace_rate / rate
            notes.append(
                f"KV: replays the {n:,} given arrival timestamps at their own timing ({num(rate)} req/s "
                f"mean, bursts as recorded), on a circle (no warm-up)"
            )
        else:
            scale = trace_rate / inp.arrival_rate_rps
            notes.append(
                f"KV: replays the {n:,} given arrival timestamps, time-scaled ×{num(scale)} from their "
                f"{num(trace_rate)} req/s to {num(inp.arrival_rate_rps)} req/s, on a circle (no warm-up)"
            )
        sim = simulate(axis, period, scale, residence, kv, source="trace")
    else:
        axis = poisson_axis(rng[_ARRIVALS], n)
        notes.append(
            f"KV: {n:,} simulated Poisson arrivals at {num(inp.arrival_rate_rps)} req/s (seed {inp.seed}), "
            f"replayed on a circle so there is no warm-up"
        )
        sim = simulate(axis, float(n), 1.0 / inp.arrival_rate_rps, residence, kv, source="poisson")
    sim = _with_closed_form(sim, rate, residence, kv, notes)
    notes.append(
        "KV: a request holds prompt + generated output tokens for its whole residence (an upper bound: real KV "
        "grows from the prompt during decode), so kv_tokens_p99 is conservative; the p99 is over time"
    )
    return KvDemand(sim, tuple(notes), exceeded, n)


def rate_free(inp: SizingInput) -> bool:
    """Whether simulate_class gives the same answer at any positive `arrival_rate_rps`: a trace
    replayed at its own timing does not read it."""
    return inp.arrival_times_s is not None and inp.trace_own_timing


def mean_lengths(inp: SizingInput) -> tuple[float, float]:
    return spec_mean(inp.prompt_tokens), spec_mean(inp.output_tokens)


def _with_closed_form(
    sim: KvSimulation, rate: float, residence: FloatArray, kv: FloatArray, notes: list[str]
) -> KvSimulation:
    """Past the switch, each KV figure is the larger of the simulation's and the closed form's.

    Closed form (M/G/∞: Poisson arrivals, every request served at once): the KV held is a compound
    Poisson sum with mean λ·E[kv·R] and variance λ·E[kv²·R]; its p99 ≈ mean + z₉₉·sd. Both terms
    grow with the rate and with every length (same drawn requests), and so does the simulation, so
    the larger of the two is monotone too — also across the switch, where it only ever adds.
    """
    switch = max(CLOSED_FORM_CONCURRENCY_PER_REQUEST * sim.requests, CLOSED_FORM_MIN_CONCURRENCY)
    if sim.source == "none" or sim.mean_concurrency <= switch:
        return sim
    mean_kv = rate * float(np.mean(kv * residence))
    sd_kv = math.sqrt(rate * float(np.mean(kv * kv * residence)))
    mean_n = rate * float(np.mean(residence))
    p99 = max(sim.kv_tokens_p99, mean_kv + Z99 * sd_kv)
    notes.append(
        f"KV: {num(sim.mean_concurrency)} requests in flight is more than {num(switch)} (the larger of "
        f"{num(CLOSED_FORM_CONCURRENCY_PER_REQUEST)} per simulated request and {num(CLOSED_FORM_MIN_CONCURRENCY)}), so the closed form (Poisson arrivals, KV mean λ·E[kv·R] {num(mean_kv)} + "
        f"z99 {num(Z99)} × sd √(λ·E[kv²·R]) {num(sd_kv)}) is used where it is larger than the simulation"
    )
    return replace(
        sim,
        kv_tokens_mean=max(sim.kv_tokens_mean, mean_kv),
        kv_tokens_p50=max(sim.kv_tokens_p50, mean_kv),
        kv_tokens_p99=p99,
        kv_tokens_max=max(sim.kv_tokens_max, p99),
        concurrency_p99=max(sim.concurrency_p99, mean_n + Z99 * math.sqrt(mean_n)),
    )
