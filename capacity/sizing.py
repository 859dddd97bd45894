"""Size one request class (docs/contract.md §3): rates, residence, concurrency, KV tail, replicas, cost.

`size()` is the entry point: it sizes every feasible operating point (capacity/sizing_point.py) and picks
the cheapest. Every intermediate number is also returned as a `Step` whose formula repeats the actual
numbers, so a page can show the whole derivation. The KV replays shared between sizings live in
capacity/kv_replays.py, the rates and demand in capacity/sizing_rates.py, the texts (assumptions,
warnings) in capacity/sizing_texts.py; their public names are importable from here as before.
"""

from __future__ import annotations

from dataclasses import replace

from capacity.failure import FailurePolicy
from capacity.input_errors import SizingInputError
from capacity.kv_replays import KvReplays
from capacity.lengths import LengthQuantiles, LengthSamples, LengthSpec
from capacity.operating_points import OperatingPoint, Slo, describe_point, feasible_points
from capacity.planning import PlanningAnswer, plan
from capacity.planning_workload import trace_workload
from capacity.realisations import envelope_answer
from capacity.sizing_inputs import AcceleratorSpec, ModelSpec, NetworkModel, SizingInput, validate
from capacity.sizing_point import kv_capacity_tokens
from capacity.sizing_point import size_at as _size_at
from capacity.sizing_rates import real_rate_rps
from capacity.sizing_result import Alternative, Replicas, SizingResult
from capacity.steps import num

__all__ = [
    "AcceleratorSpec",
    "LengthQuantiles",
    "LengthSamples",
    "LengthSpec",
    "KvReplays",
    "ModelSpec",
    "NetworkModel",
    "OperatingPoint",
    "Alternative",
    "Replicas",
    "SizingInput",
    "SizingInputError",
    "SizingResult",
    "Slo",
    "kv_capacity_tokens",
    "real_rate_rps",
    "size",
]


def size(inp: SizingInput, *, fleet_only: bool = False, replays: KvReplays | None = None) -> SizingResult:
    """Size one request class at the cheapest feasible operating point (and so replica shape).

    Every point meeting the SLO is sized in full (its own latencies, KV room and replica shape) and
    the one with the lowest fully loaded cost per hour wins — replicas.total × accelerators per
    replica × price, failure and startup reserve included; ties go to fewer accelerators, then to
    the earlier point. The runners-up come back in `alternatives` with their cost. Raises
    SizingInputError naming the first bad field.

    `fleet_only` leaves out the CU to buy (`planning`, a replay of the whole workload that costs more
    than the rest of the sizing) and the peak's extra cost, for a caller that reads only the fleet and
    its cost: a day's hours, the cost per planning basis. `replays` shares the KV replays between
    sizings of one class at other rates (see KvReplays).
    """
    policy = validate(inp)
    m = inp.model
    points, what = feasible_points(
        inp.operating_points, inp.slo, model=m.slug, accelerator=inp.accelerator, allow_ceiling=inp.allow_ceiling
    )
    priced = {a.slug for a in inp.accelerators}
    unpriced = sorted({p.accelerator for p in points if p.accelerator not in priced})
    points = [p for p in points if p.accelerator in priced]
    if not points:
        raise SizingInputError("accelerator", f"no catalogue entry (or price) for accelerator(s) {', '.join(unpriced)}")
    results, misfits, sims = [], [], replays or KvReplays()
    for p in points:
        try:
            results.append(_size_at(inp, policy, p, sims))
        except SizingInputError as e:
            # A shape whose accelerators cannot hold the weights is not feasible; anything else is bad input.
            if e.field != "model.weights_gb":
                raise
            misfits.append(e)
    if not results:
        raise misfits[0]
    order = sorted(range(len(results)), key=lambda i: (results[i].cost.per_hour.value, results[i].accelerators, i))
    best = results[order[0]]
    alternatives = tuple(_alternative(results[i], best) for i in order[1:])
    why = _why(best, alternatives, what)
    notes = [why]
    if unpriced:
        notes.append(f"left out: points on {', '.join(unpriced)}, which has no price under this pricing")
    notes.extend(f"left out: {e.message}" for e in misfits)
    if fleet_only:
        return replace(best, assumptions=(*notes, *best.assumptions), alternatives=alternatives, why_chosen=why)
    answer = planning_answer(inp)
    notes.append(f"CU to buy: {answer.check}; requests from {answer.planning_basis}")
    extra, extra_note = _peak_extra(inp, policy, best, sims)
    if extra_note:
        notes.append(extra_note)
    return replace(
        best,
        assumptions=(*notes, *best.assumptions),
        alternatives=alternatives,
        why_chosen=why,
        planning=answer,
        peak_extra_cost_per_hour=extra,
    )


def planning_answer(inp: SizingInput) -> PlanningAnswer:
    """The CU to buy for this class (docs/planning.md): its trace at its own timing (or scaled to an
    explicit mean rate), else its envelope with over-dispersed arrivals."""
    m = inp.model
    times, p, o = inp.arrival_times_s, inp.prompt_tokens, inp.output_tokens
    h, c = inp.cache_hit_ratio, inp.cancellation_ratio
    if times is not None and isinstance(p, LengthSamples) and isinstance(o, LengthSamples):
        w = trace_workload(
            times,
            p.values,
            o.values,
            w_out=m.w_out,
            w_cached=m.w_cached,
            cache_hit_ratio=h,
            cancellation_ratio=c,
            mean_rate_rps=None if inp.trace_own_timing else inp.arrival_rate_rps,
        )
        return plan(w, r_wt_per_s=m.r_wt_per_s, target_throttled_share=inp.target_throttled_share)
    # A stated envelope: answered across independent draws (capacity.realisations), not one seeded hour.
    return envelope_answer(
        rate_rps=inp.arrival_rate_rps,
        prompt=p,
        output=o,
        w_out=m.w_out,
        w_cached=m.w_cached,
        cache_hit_ratio=h,
        cancellation_ratio=c,
        minute_rate_cv=inp.minute_rate_cv,
        r_wt_per_s=m.r_wt_per_s,
        target_throttled_share=inp.target_throttled_share,
        realisations=int(inp.realisations),
        quantile=inp.realisation_quantile,
        seed=inp.seed,
    )


def _peak_extra(
    inp: SizingInput, policy: FailurePolicy, best: SizingResult, sims: KvReplays | None = None
) -> tuple[float | None, str | None]:
    """What sizing for the planning rate rather than the mean costs per hour, on the chosen point."""
    mean = real_rate_rps(inp)
    if mean >= inp.arrival_rate_rps:
        return 0.0, None
    at_mean = _size_at(replace(inp, arrival_rate_rps=mean), policy, best.operating_point_used, sims)
    extra = best.cost.per_hour.value - at_mean.cost.per_hour.value
    return extra, (
        f"cost: the planning rate {num(inp.arrival_rate_rps)} req/s needs {best.replicas.total} replicas at "
        f"{num(best.cost.per_hour.value)}/h; the mean {num(mean)} req/s would need {at_mean.replicas.total} at "
        f"{num(at_mean.cost.per_hour.value)}/h, so the peak's extra cost is {num(extra)}/h"
    )


def _alternative(r: SizingResult, best: SizingResult) -> Alternative:
    op = r.operating_point_used
    return Alternative(
        label=op.label,
        accelerator=op.accelerator,
        accelerators_per_replica=op.accelerators_per_replica,
        replicas_total=r.replicas.total,
        accelerators=r.accelerators,
        cost_per_hour=r.cost.per_hour.value,
        extra_cost_per_hour=r.cost.per_hour.value - best.cost.per_hour.value,
    )


def _why(best: SizingResult, alternatives: tuple[Alternative, ...], what: str) -> str:
    op = best.operating_point_used
    head = (
        f"operating point {describe_point(op)}: the cheapest of {len(alternatives) + 1} feasible ({what}) at "
        f"{num(best.cost.per_hour.value)}/h fully loaded for {best.replicas.total} replicas × "
        f"{op.accelerators_per_replica} {op.accelerator}"
    )
    if not alternatives:
        return head
    runner = alternatives[0]
    return (
        f"{head}; the runner-up, {runner.label}, needs {runner.replicas_total} replicas × "
        f"{runner.accelerators_per_replica} = {runner.accelerators} accelerators at {num(runner.cost_per_hour)}/h "
        f"(+{num(runner.extra_cost_per_hour)}/h)"
    )
