"""Turn a request class into simulated requests (arrival, KV tokens, residence) for kvsim.

Every random draw comes from its own seeded stream, so changing one input (say the cancellation
ratio) leaves the other draws alone, and two sizings that differ only in rate or lengths see the
same requests — the common random numbers the monotonicity rules rely on.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capacity.kvsim import EMPTY, FloatArray, KvSimulation, poisson_axis, simulate
from capacity.lengths import (
    LengthQuantiles,
    LengthSamples,
    LengthSpec,
    cycled_indices,
    draw_lengths,
    spec_mean,
    stratified_uniform,
)
from capacity.sizing_inputs import SizingInput
from capacity.steps import num

_ARRIVALS, _PROMPT, _OUTPUT, _CANCEL = 0, 1, 2, 3


@dataclass(frozen=True, eq=False)
class KvDemand:
    sim: KvSimulation
    assumptions: tuple[str, ...]


def _paired(inp: SizingInput) -> bool:
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
    rng = {k: np.random.default_rng([inp.seed, k]) for k in (_ARRIVALS, _PROMPT, _OUTPUT, _CANCEL)}
    if _paired(inp) and order is None:
        assert isinstance(inp.prompt_tokens, LengthSamples)
        order = cycled_indices(rng[_PROMPT], len(inp.prompt_tokens.values), n)
    prompt = _lengths(inp.prompt_tokens, rng[_PROMPT], n, order)
    output = _lengths(inp.output_tokens, rng[_OUTPUT], n, order)
    if _paired(inp):
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
    prompt = np.minimum(prompt, ctx)
    output = np.minimum(output, ctx)
    if inp.cancellation_ratio > 0:
        cancelled = stratified_uniform(rng[_CANCEL], n) < inp.cancellation_ratio
        output = np.where(cancelled, output * 0.5, output)
    kv = prompt + output
    residence = ttft_s + output * tpot_s
    if times is not None:
        t = times[order]
        axis = t - t[0]
        # One mean gap closes the circle, so evenly spaced arrivals stay evenly spaced across the wrap.
        period = float(axis[-1]) * n / (n - 1)
        trace_rate = n / period
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
    notes.append(
        "KV: a request holds prompt + generated output tokens for its whole residence (an upper bound: real KV "
        "grows from the prompt during decode), so kv_tokens_p99 is conservative; the p99 is over time"
    )
    return KvDemand(sim, tuple(notes))


def mean_lengths(inp: SizingInput) -> tuple[float, float]:
    return spec_mean(inp.prompt_tokens), spec_mean(inp.output_tokens)
