"""Latency under load for one sizing on one serving curve: where the sized fleet's SLO breaks, what
the simulation predicts at the planning rate, one replica more or less, the fewest replicas the
simulation meets the SLO with beside the utilisation rule, which half breaks first and why, and the
chart's series (docs/latency.md). Every latency figure comes from the answer's own simulation; the
fitted curve gives its step law and is charted beside it. Pure: the caller finds the curve.
"""

from __future__ import annotations

import math
from typing import Any

from capacity.latency_curve import LatencyCurve
from capacity.latency_fleet import Fleet, StepPhysics, Workload, workload
from capacity.latency_search import LATENCIES, MAX_FACTOR, Breaking, Probe, breaking, slo_fleet_replicas
from capacity.rate_basis import MinuteRates
from capacity.sizing_checks import prefill_bound
from capacity.sizing_inputs import SizingInput
from capacity.sizing_point import accelerator_for
from capacity.sizing_result import SizingResult

CHART_POINTS = 41
SIM_FACTORS = (1.0,)  # of the planning rate: simulated for the chart besides the breaking-rate search


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


def empty(reason: str) -> dict[str, Any]:
    return {
        "latency_curve": None,
        "latency_at_planning_rate": None,
        "slo_attainment": None,
        "slo_breaking_rate_rps": None,
        "latency_under_load": {"unavailable": reason},
    }


def _fleet(inp: SizingInput, result: SizingResult, curve: LatencyCurve) -> Fleet:
    op = result.operating_point_used
    acc = accelerator_for(inp, op)
    bound = prefill_bound(
        accelerators_per_replica=op.accelerators_per_replica,
        dense_tflops=acc.dense_tflops,
        active_params_b=inp.model.active_params_b,
        mfu=inp.prefill_mfu,
        uncached_prompt_tps=0.0,
        utilization=1.0,
        lb_unevenness=1.0,
    )
    return Fleet(
        curve=curve,
        wt_per_request=result.demand_wt_per_s / inp.arrival_rate_rps,
        wt_per_out_ref=result.goodput_wt_per_s_per_replica / op.out_tps_per_replica,
        lb_unevenness=inp.lb_unevenness,
        prefill_bound_tps=bound.tokens_per_s if bound else None,
        ref_prompt_tokens=op.ref_mix.mean_prompt,
    )


def latency_report(
    inp: SizingInput, result: SizingResult, curve: LatencyCurve, minute_rates: MinuteRates | None = None
) -> dict[str, Any]:
    """The four docs/contract.md §3 latency fields plus `latency_under_load` (what the page charts and
    advises), every figure from the answer's own simulation (capacity/latency_search.py)."""
    lam, n = inp.arrival_rate_rps, result.replicas.steady
    if lam <= 0 or n < 1:
        return empty("no arrivals: there is no load to predict latency at")
    fleet = _fleet(inp, result, curve)
    work = _workload(inp, minute_rates, n)
    kv, w_out, slo = result.kv_capacity_tokens_per_replica, inp.model.w_out, inp.slo
    probes: dict[int, Probe] = {}

    def probe_for(m: int) -> Probe:
        if m not in probes:
            probes[m] = Probe(fleet, work, m, slo, kv, w_out, lam)
        return probes[m]

    mine = probe_for(n)
    for f in SIM_FACTORS:
        mine.run(f)
    brk = breaking(mine, fleet.breaking_guess(work, n, slo, kv, w_out) / lam)  # a start, not the rule
    at_plan = mine.at(1.0)
    rate = brk.factor * lam
    neighbours = _neighbours(probe_for, n, at_plan)
    ph = fleet.physics(w_out)
    step = mine.runs[brk.first_miss].tpot_p50_s if brk.first_miss is not None else 0.0
    return {
        "latency_curve": {**curve.to_dict(), "physics": _physics_dict(ph)},
        "latency_at_planning_rate": {k: at_plan[k] for k in LATENCIES},
        "slo_attainment": at_plan["slo_attainment"],
        "slo_breaking_rate_rps": rate,
        "latency_under_load": {
            "replicas": n,
            "slo": {"ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s},
            "planning_rate_rps": lam,
            "breaking_over_planning": brk.factor,
            "meets_slo_at_planning_rate": at_plan["meets_slo"],
            "p99_at_planning_rate": dict(zip(("ttft_s", "tpot_s"), map(_finite, fleet.p99(lam, n)), strict=True)),
            "simulation": at_plan["note"],
            "workload": work.source,
            "neighbours": neighbours,
            "breaks": _breaks(brk, fleet, ph, inp, result, lam, n, step),
            "slo_fleet": _slo_fleet(probe_for, result, brk.factor),
            "series": _series(fleet, n, lam, rate, mine),
            "load_per_replica": fleet.load(lam, n),
        },
    }


def _physics_dict(ph: StepPhysics) -> dict[str, Any]:
    return {
        "prefill_tokens_per_s": ph.prefill_tps,
        "prefill_s_per_token": ph.k_prefill_s,
        "decode_s_per_sequence_step": ph.k_decode_s,
        "ttft_floor_s": ph.ttft_floor_s,
        "source": ph.source,
    }


def _neighbours(probe_for: Any, n: int, at_plan: dict[str, Any]) -> list[dict[str, Any]]:
    """One replica less and more at the planning rate; p99s held monotone in the replicas (one less
    never below the sized fleet, one more never above it)."""
    out = []
    for m in (n - 1, n + 1):
        if m < 1:
            continue
        row = dict(probe_for(m).at(1.0))
        pick = max if m < n else min
        for k in LATENCIES:
            row[k] = pick(row[k], at_plan[k])
        row["slo_attainment"] = (min if m < n else max)(row["slo_attainment"], at_plan["slo_attainment"])
        out.append(row)
    return out


def _breaks(
    brk: Breaking,
    fleet: Fleet,
    ph: StepPhysics,
    inp: SizingInput,
    result: SizingResult,
    lam: float,
    n: int,
    step_s: float,
) -> dict[str, Any]:
    """Which half breaks first and why, in words: prefill-bound when the prompts take most of a
    replica's working time at the breaking rate (charged at the compute bound), else decode-bound."""
    rate = brk.factor * lam
    if brk.first_miss is None:
        return {
            "half": None,
            "bound": None,
            "words": f"the simulation meets the SLO up to {MAX_FACTOR:g}× the planning rate, the highest it tries",
        }
    per_replica = rate * inp.lb_unevenness / n
    prefill_wt = result.uncached_input_tokens_per_s / lam + inp.model.w_cached * (
        (result.input_tokens_per_s - result.uncached_input_tokens_per_s) / lam
    )
    out_tokens = result.output_tokens_per_s / lam
    prefill_s = per_replica * prefill_wt * ph.k_prefill_s
    # Decode: each sequence's share of a step, and the step's floor once per step (a typical step lasts
    # the simulated TPOT p50 at the first miss).
    decode_s = per_replica * out_tokens * ph.k_decode_s + (ph.a_s / step_s if step_s > 0 else 0.0)
    share = prefill_s / (prefill_s + decode_s) if prefill_s + decode_s > 0 else 0.0
    bound = "prefill-bound" if share >= 0.5 else "decode-bound"
    pace = "no faster than the compute bound" if fleet.prefill_bound_tps else "no compute bound known"
    why = (
        f"prompts take {share:.0%} of each replica's working time there (decode and the steps' floor the rest), charged at {ph.prefill_tps:,.0f} prompt "
        f"tokens/s ({pace})"
    )
    return {
        "half": brk.half,
        "bound": bound,
        "prefill_share": share,
        "first_miss_rate_rps": brk.first_miss * lam,
        "words": (
            f"{brk.half} p99 breaks first: the simulation meets the SLO up to {rate:,.2f} req/s "
            f"({brk.factor:.2f}× the planning rate) and misses at {brk.first_miss * lam:,.2f} req/s, where {brk.half} "
            f"p99 is {brk.over:.2f}× its limit; {bound}: {why}"
        ),
    }


def _workload(inp: SizingInput, minute_rates: MinuteRates | None, replicas: int) -> Workload:
    scale = 1.0
    if inp.arrival_times_s is not None and minute_rates is not None:
        # The trace's own timing, stretched or squeezed so its busiest minute runs at the planning rate.
        scale = inp.arrival_rate_rps / minute_rates.rate("peak_1m")
    return workload(
        rate_rps=inp.arrival_rate_rps,
        replicas=replicas,
        prompt=inp.prompt_tokens,
        output=inp.output_tokens,
        cache_hit_ratio=inp.cache_hit_ratio,
        cancellation_ratio=inp.cancellation_ratio,
        w_cached=inp.model.w_cached,
        context_length=inp.model.context_length,
        trace_times_s=inp.arrival_times_s,
        trace_time_scale=scale,
    )


def _slo_fleet(probe_for: Any, result: SizingResult, breaking_factor: float) -> dict[str, Any]:
    """The fewest replicas at which the simulation meets the SLO at the planning rate (never under the KV
    need), with its check (that fleet's simulation and one replica less's), beside the utilisation rule's
    steady fleet, both at the fully loaded price of one replica-hour."""
    per_replica = result.cost.per_hour.value / result.replicas.total if result.replicas.total else 0.0
    rule_n = result.replicas.steady
    out: dict[str, Any] = {
        "rule_replicas": rule_n,
        "rule_cost_per_hour": rule_n * per_replica,
        "cost_per_replica_hour": per_replica,
        "currency": result.cost.per_hour.currency,
        "for_kv": result.replicas.for_kv,
    }
    cap = max(4 * rule_n, rule_n + 16)
    n, check, less = slo_fleet_replicas(probe_for, rule_n, breaking_factor, result.replicas.for_kv, cap)
    if n is None:
        return {
            **out,
            "replicas": None,
            "why": f"the simulation misses the SLO at the planning rate up to {cap} replicas",
        }
    return {**out, "replicas": n, "cost_per_hour": n * per_replica, "check": check, "one_less": less}


def _series(fleet: Fleet, n: int, lam: float, breaking: float, probe: Probe) -> dict[str, Any]:
    top = max(1.3 * breaking, 1.5 * lam)
    rates = [top * i / (CHART_POINTS - 1) for i in range(CHART_POINTS)]
    p99 = [fleet.p99(r, n) for r in rates]
    marks = [e for e in probe.envelope() if e["rate_rps"] <= top]
    return {
        "rate_rps": rates,
        "ttft_p99_s": [_finite(t) for t, _ in p99],
        "tpot_p99_s": [_finite(t) for _, t in p99],
        "sim": [{k: m[k] for k in ("rate_rps", "meets_slo", *LATENCIES)} for m in marks],
    }
