"""A fleet of N replicas on one serving curve: the load each replica carries, where the SLO breaks,
the replicas the SLO needs with a margin, and the workload the batching simulation replays.

Load mapping (docs/latency.md): a class request costs `wt_per_request` weighted tokens; the curve's
x is output tokens/s of the point's reference mix, each worth `wt_per_out_ref` weighted tokens. At
arrival rate λ on N replicas behind a balancer with unevenness lb, the busiest replica carries
`x = λ × wt_per_request × lb ÷ (N × wt_per_out_ref)`. Every function below is monotone the way the
rules ask: x grows with λ and falls with N, the curve grows with x, and a tighter SLO lowers max_load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from capacity.batching_sim import MAX_SIM_REQUESTS, FloatArray, SimResult, StepLaw, simulate
from capacity.latency_curve import LatencyCurve, linear_fit
from capacity.lengths import LengthSamples, LengthSpec, draw_lengths, stratified_uniform
from capacity.operating_points import Slo

MAX_FLEET_ARRIVALS = 200_000
SEED = 31


# Where the prefill bound leaves a measured point less decode time than this share of its TPOT, the
# point is held at it (the bound and the measured throughput disagree: said in `physics`).
MIN_DECODE_SHARE = 0.1
# Prompt tokens prefilled per step (chunked prefill): vLLM's default token budget of an online server
# (max_num_batched_tokens); a longer prompt prefills over several steps while the batch decodes.
PREFILL_CHUNK = 2048


@dataclass(frozen=True)
class StepPhysics:
    """How the simulation splits one replica's time: the step floor, seconds per prefill weighted
    token (no faster than the compute bound), seconds per decoding sequence per step, the batch that
    carries the saturation throughput, and what was taken from where."""

    a_s: float
    k_prefill_s: float
    k_decode_s: float
    ttft_floor_s: float
    prefill_tps: float
    max_batch: int
    source: str


@dataclass(frozen=True)
class Fleet:
    curve: LatencyCurve
    wt_per_request: float
    wt_per_out_ref: float
    lb_unevenness: float
    # The replica's prefill compute bound (prompt tokens/s, the PREFILL_BOUND figure); None: unknown.
    prefill_bound_tps: float | None = None
    ref_prompt_tokens: float = 0.0

    def load(self, rate_rps: float, replicas: int) -> float:
        return rate_rps * self.wt_per_request * self.lb_unevenness / (replicas * self.wt_per_out_ref)

    def p99(self, rate_rps: float, replicas: int) -> tuple[float, float]:
        x = self.load(rate_rps, replicas)
        return self.curve.ttft_p99(x), self.curve.tpot_p99(x)

    def breaking_rate(self, slo: Slo, replicas: int) -> float:
        """The arrival rate at which the first predicted p99 reaches its limit on `replicas`."""
        x = self.curve.max_load(slo.ttft_p99_s, slo.tpot_p99_s)
        return x * replicas * self.wt_per_out_ref / (self.wt_per_request * self.lb_unevenness)

    def replicas_for(self, slo: Slo, rate_rps: float, margin: float) -> int | None:
        """Fewest replicas whose breaking rate is at least `margin` × `rate_rps` (None: the SLO is under
        the curve's floor, no fleet meets it)."""
        per_replica = self.breaking_rate(slo, 1)
        if per_replica <= 0:
            return None
        n = max(1, math.ceil(margin * rate_rps / per_replica))
        while self.breaking_rate(slo, n) < margin * rate_rps:  # float rounding at the boundary
            n += 1
        return n

    def breaking_guess(self, work: Workload, replicas: int, slo: Slo, kv_budget: float, w_out: float) -> float:
        """A first guess at the simulation's breaking rate (req/s) from its step law and the workload's
        means, where the replica runs out of time (prefill and decode of the mean request at the
        largest batch) or the mean TPOT reaches its limit: only where the search starts."""
        law = self.step_law(kv_budget, w_out)
        pre, out = float(np.mean(work.prefill_wt)), float(np.mean(work.output_tokens))
        batch = max(1.0, min(law.max_batch, kv_budget / max(float(np.mean(work.kv_tokens)), 1.0)))
        b = law.k_s * law.w_out
        per_request = pre * law.prefill_s_per_wt
        capacity = 1.0 / (per_request + out * (law.a_s / batch + b))
        tpot = (1.0 - law.a_s / slo.tpot_p99_s) / (per_request + b * out) if slo.tpot_p99_s > law.a_s else 0.0
        return max(min(0.9 * capacity, tpot), 0.0) * replicas / self.lb_unevenness

    def physics(self, w_out: float) -> StepPhysics:
        """Split each measured point's step (its TPOT) into prefill and decode, and fit decode's law.

        The curve's points all carry one mix, so they cannot separate prefill from decode: prefill
        takes the replica's compute bound (never faster). At a point carrying x output tokens/s the
        prompts take the share `s = x × prompt per output × k_prefill` of the replica's time, the batch
        is `B = x × TPOT` (Little), and the rest of the step, `TPOT × (1 − s)`, is decode:
        `a + k_decode × B`, fitted through the points (the curve at its latency points; exact through
        two). Where the bound leaves the curve's own split positive this is that split; where it
        would leave a point less than MIN_DECODE_SHARE of its step, the point is held there and said.
        Without a bound, prefill is charged like any weighted token (the curve's own split)."""
        c = self.curve
        k = 1.0 / (c.x_inf * self.wt_per_out_ref)
        prompt_per_out = max(self.wt_per_out_ref - w_out, 0.0)
        bound = self.prefill_bound_tps
        k_p = max(k, 1.0 / bound) if bound else k
        xs = sorted({p.out_tps for p in c.points if p.has_latency and p.out_tps < c.x_sat})
        if len(xs) < 2:
            top = xs[-1] if xs else 0.5 * c.x_sat
            xs = [0.5 * top, top]
        held = False
        rows = []
        for x in xs:
            tpot = c.tpot_p99(x)
            share = x * prompt_per_out * k_p
            held = held or share > 1.0 - MIN_DECODE_SHARE
            rows.append((x * tpot, tpot * max(1.0 - share, MIN_DECODE_SHARE)))
        a, b = linear_fit([bt for bt, _ in rows], [d for _, d in rows])
        if b < 0 or a <= 0:  # decode not rising with the batch: flat at the points' mean
            a, b = max(sum(d for _, d in rows) / len(rows), 1e-6), 0.0
        # The batch that carries x_sat: B = x_sat × step, the step (a + b B) ÷ (1 − prefill share).
        free = 1.0 - c.x_sat * prompt_per_out * k_p - c.x_sat * b
        s_sat = c.a_s / (1.0 - c.x_sat / c.x_inf)
        max_batch = max(1, round(c.x_sat * a / free if free > 0 else c.x_sat * s_sat))
        if bound:
            source = (
                f"prefill at the compute bound {bound:,.0f} prompt tokens/s per replica, in chunks of "
                f"{PREFILL_CHUNK:,} tokens a step (the points, all one mix, cannot separate prefill from decode); "
                f"decode takes the rest of each measured point's step"
            )
            if held:
                source += (
                    f" (the bound leaves a measured point under {MIN_DECODE_SHARE:.0%} of its step for decode: "
                    f"it serves prompts faster than the bound allows, held there)"
                )
        else:
            source = (
                "no prefill bound (the catalogue lacks FLOP/s or parameters): prefill at the curve's weighted-token "
                f"rate, in chunks of {PREFILL_CHUNK:,} tokens a step"
            )
        # The curve's TTFT floor already holds one prefill of the reference prompt and a step at no load.
        floor = max(0.0, c.p_s - a - k_p * self.ref_prompt_tokens)
        return StepPhysics(a, k_p, b, floor, 1.0 / k_p, max_batch, source)

    def step_law(self, kv_budget: float, w_out: float) -> StepLaw:
        ph = self.physics(w_out)
        return StepLaw(
            a_s=ph.a_s,
            k_s=ph.k_decode_s / w_out if w_out > 0 else ph.k_decode_s,
            max_batch=ph.max_batch,
            kv_budget=kv_budget,
            ttft_floor_s=ph.ttft_floor_s,
            w_out=w_out if w_out > 0 else 1.0,
            k_prefill_s=ph.k_prefill_s,
            chunk=PREFILL_CHUNK,
        )


@dataclass(frozen=True, eq=False)
class Workload:
    """Fleet arrivals at the planning rate with each request's prefill work, output and KV tokens."""

    arrival_s: FloatArray
    prefill_wt: FloatArray
    output_tokens: FloatArray
    kv_tokens: FloatArray
    source: str

    def at_rate(self, factor: float) -> Workload:
        """The same requests arriving `factor` times as fast (common random numbers across rates)."""
        return Workload(self.arrival_s / factor, self.prefill_wt, self.output_tokens, self.kv_tokens, self.source)


def workload(
    *,
    rate_rps: float,
    replicas: int,
    prompt: LengthSpec,
    output: LengthSpec,
    cache_hit_ratio: float,
    cancellation_ratio: float,
    w_cached: float,
    context_length: int,
    trace_times_s: FloatArray | None = None,
    trace_time_scale: float = 1.0,
) -> Workload:
    """A trace's own requests (times divided by `trace_time_scale`), or Poisson arrivals at `rate_rps`
    with lengths drawn from the specs (seeded; enough for MAX_SIM_REQUESTS per replica, bounded)."""
    if trace_times_s is not None and isinstance(prompt, LengthSamples) and isinstance(output, LengthSamples):
        order = np.argsort(trace_times_s, kind="stable")
        times = (trace_times_s[order] - trace_times_s[order][0]) / trace_time_scale
        p, o = prompt.values[order].astype(np.float64), output.values[order].astype(np.float64)
        source = "trace"
    else:
        n = min(replicas * MAX_SIM_REQUESTS, MAX_FLEET_ARRIVALS)
        rng = np.random.default_rng(SEED)
        times = np.cumsum(rng.exponential(1.0 / rate_rps, n))
        p = _draw(prompt, np.random.default_rng([SEED, 1]), n)
        # Paired samples (one request each index) keep their pairing: the same draw for both.
        pair = isinstance(prompt, LengthSamples) and isinstance(output, LengthSamples)
        pair = pair and len(prompt.values) == len(output.values)  # type: ignore[union-attr]
        o = _draw(output, np.random.default_rng([SEED, 1 if pair else 2]), n)
        source = "poisson"
    ctx = float(context_length)
    p, o = np.minimum(p, ctx), np.minimum(o, ctx)
    o = np.maximum(1.0, np.round(o * (1.0 - cancellation_ratio / 2.0)))
    prefill = p * ((1.0 - cache_hit_ratio) + w_cached * cache_hit_ratio)
    return Workload(times, prefill, o, p + o, source)


def _draw(spec: LengthSpec, rng: np.random.Generator, n: int) -> FloatArray:
    if isinstance(spec, LengthSamples):
        idx = rng.integers(0, len(spec.values), n)
        return draw_lengths(spec, np.empty(0), idx)
    return draw_lengths(spec, stratified_uniform(rng, n), np.empty(0, dtype=np.intp))


def simulate_fleet(fleet: Fleet, work: Workload, replicas: int, slo: Slo, kv_budget: float, w_out: float) -> SimResult:
    return simulate(
        arrival_s=work.arrival_s,
        prefill_wt=work.prefill_wt,
        output_tokens=work.output_tokens,
        kv_tokens=work.kv_tokens,
        replicas=replicas,
        lb_unevenness=fleet.lb_unevenness,
        law=fleet.step_law(kv_budget, w_out),
        ttft_slo_s=slo.ttft_p99_s,
        tpot_slo_s=slo.tpot_p99_s,
    )
