"""Size one request class (CONTRACT §3): rates, residence, concurrency, KV tail, replicas, cost.

`size()` is the entry point. Every intermediate number is also returned as a `Step` whose formula
repeats the actual numbers, so a page can show the whole derivation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from capacity.cost import accelerators_for, pool_cost
from capacity.failure import FailurePolicy, replicas_for_failure
from capacity.input_errors import SizingInputError
from capacity.kv_demand import mean_lengths, paired, simulate_class
from capacity.kvsim import KvSimulation
from capacity.lengths import LengthQuantiles, LengthSamples, LengthSpec
from capacity.operating_points import OperatingPoint, Slo, describe_point, feasible_points, latencies_used
from capacity.planning import PlanningAnswer, plan
from capacity.planning_workload import envelope_workload, trace_workload
from capacity.sizing_checks import (
    PrefillBound,
    context_warning,
    implausible_warnings,
    prefill_bound,
    prefill_warning,
)
from capacity.sizing_inputs import AcceleratorSpec, ModelSpec, NetworkModel, SizingInput, validate
from capacity.sizing_result import Alternative, Replicas, SizingResult
from capacity.steps import Step, ceil_whole, num
from capacity.units import replica_goodput_wt_per_s

__all__ = [
    "AcceleratorSpec",
    "LengthQuantiles",
    "LengthSamples",
    "LengthSpec",
    "ModelSpec",
    "NetworkModel",
    "OperatingPoint",
    "Alternative",
    "Replicas",
    "SizingInput",
    "SizingInputError",
    "SizingResult",
    "Slo",
    "size",
]

GB = 1e9


def _accelerator_for(inp: SizingInput, point: OperatingPoint) -> AcceleratorSpec:
    for acc in inp.accelerators:
        if acc.slug == point.accelerator:
            return acc
    raise SizingInputError("accelerator", f"no catalogue entry for accelerator '{point.accelerator}' of {point.label}")


def kv_capacity_tokens(
    model: ModelSpec, acc: AcceleratorSpec, accelerators_per_replica: int, instances: int = 1
) -> float:
    """KV tokens one replica can hold: its memory less one copy of the weights per instance it
    runs (GB = 1e9 bytes)."""
    free_gb = acc.memory_gb * accelerators_per_replica - instances * model.weights_gb
    if free_gb <= 0:
        copies = f"{instances} copies of " if instances > 1 else ""
        raise SizingInputError(
            "model.weights_gb",
            f"{copies}weights {num(model.weights_gb)} GB do not fit in {accelerators_per_replica} × "
            f"{num(acc.memory_gb)} GB of {acc.slug}",
        )
    return float(int(free_gb * GB // model.kv_bytes_per_token))


def size(inp: SizingInput) -> SizingResult:
    """Size one request class at the cheapest feasible operating point (and so replica shape).

    Every point meeting the SLO is sized in full (its own latencies, KV room and replica shape) and
    the one with the lowest fully loaded cost per hour wins — replicas.total × accelerators per
    replica × price, failure and startup reserve included; ties go to fewer accelerators, then to
    the earlier point. The runners-up come back in `alternatives` with their cost. Raises
    SizingInputError naming the first bad field.
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
    results, misfits = [], []
    for p in points:
        try:
            results.append(_size_at(inp, policy, p))
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
    answer = planning_answer(inp)
    notes.append(f"CU to buy: {answer.check}; requests from {answer.planning_basis}")
    extra, extra_note = _peak_extra(inp, policy, best)
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
    else:
        w = envelope_workload(
            rate_rps=inp.arrival_rate_rps,
            prompt=p,
            output=o,
            w_out=m.w_out,
            w_cached=m.w_cached,
            cache_hit_ratio=h,
            cancellation_ratio=c,
            minute_rate_cv=inp.minute_rate_cv,
            seed=inp.seed,
        )
    return plan(w, r_wt_per_s=m.r_wt_per_s, target_throttled_share=inp.target_throttled_share)


def real_rate_rps(inp: SizingInput) -> float:
    """The workload's real volume: a trace replayed at its own timing runs at its mean rate
    (requests ÷ duration), whatever planning rate sized the fleet."""
    t = inp.arrival_times_s
    if inp.trace_own_timing and t is not None and len(t) > 1:
        return len(t) / max(float(t.max() - t.min()), 1.0)
    return inp.arrival_rate_rps


def _peak_extra(inp: SizingInput, policy: FailurePolicy, best: SizingResult) -> tuple[float | None, str | None]:
    """What sizing for the planning rate rather than the mean costs per hour, on the chosen point."""
    mean = real_rate_rps(inp)
    if mean >= inp.arrival_rate_rps:
        return 0.0, None
    at_mean = _size_at(replace(inp, arrival_rate_rps=mean), policy, best.operating_point_used)
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


def _size_at(inp: SizingInput, policy: FailurePolicy, op: OperatingPoint) -> SizingResult:
    """The whole sizing on one operating point."""
    m, lam = inp.model, inp.arrival_rate_rps
    acc = _accelerator_for(inp, op)
    apr = op.accelerators_per_replica
    ttft, tpot, latency_source = latencies_used(op, inp.slo)
    steps: list[Step] = []

    def step(name: str, value: float, unit: str, formula: str) -> float:
        steps.append(Step(name, value, unit, formula))
        return value

    mean_p, mean_o = mean_lengths(inp)
    h, c = inp.cache_hit_ratio, inp.cancellation_ratio
    out_eff = step(
        "output tokens per request",
        mean_o * (1 - c / 2),
        "tokens",
        f"{num(mean_o * (1 - c / 2))} = mean output {num(mean_o)} × (1 − cancelled {num(c)} ÷ 2)",
    )
    in_tps = step(
        "input tokens/s",
        lam * mean_p,
        "tokens/s",
        f"{num(lam * mean_p)} = {num(lam)} req/s × {num(mean_p)} prompt tokens",
    )
    uncached = step(
        "uncached input tokens/s",
        in_tps * (1 - h),
        "tokens/s",
        f"{num(in_tps * (1 - h))} = {num(in_tps)} tokens/s × (1 − cache hit {num(h)})",
    )
    out_tps = step(
        "output tokens/s", lam * out_eff, "tokens/s", f"{num(lam * out_eff)} = {num(lam)} req/s × {num(out_eff)} tokens"
    )
    residence = step(
        "mean residence",
        ttft + out_eff * tpot,
        "s",
        f"{num(ttft + out_eff * tpot)} s = TTFT {num(ttft)} s + {num(out_eff)} tokens × TPOT {num(tpot)} s",
    )
    step("prefill concurrency", lam * ttft, "requests", f"{num(lam * ttft)} = {num(lam)} req/s × TTFT {num(ttft)} s")
    decode_c = lam * out_eff * tpot
    step(
        "decode concurrency",
        decode_c,
        "requests",
        f"{num(decode_c)} = {num(lam)} req/s × {num(out_eff * tpot)} s decoding",
    )
    concurrency = step(
        "mean concurrency",
        lam * residence,
        "requests",
        f"{num(lam * residence)} = {num(lam)} req/s × {num(residence)} s",
    )
    demand = _kv_and_load(inp, op, acc, ttft, tpot, uncached, in_tps * h, out_tps, out_eff, mean_p, step)
    prefill = prefill_bound(
        accelerators_per_replica=apr,
        dense_tflops=acc.dense_tflops,
        active_params_b=m.active_params_b,
        mfu=inp.prefill_mfu,
        uncached_prompt_tps=uncached,
        utilization=inp.utilization_target,
        lb_unevenness=inp.lb_unevenness,
    )
    replicas = _replicas(inp, policy, demand, prefill, step)
    accelerators = accelerators_for(replicas.total, apr, acc.chips_per_slice)
    step(
        "accelerators",
        accelerators,
        "accelerators",
        f"{accelerators} = {replicas.total} replicas × {apr} per replica, in whole slices of {acc.chips_per_slice}",
    )
    capacity = replicas.total * demand.goodput_wt
    # Cost per useful token over the real volume: the fleet is sized for the planning rate, but
    # only the mean rate's tokens are ever produced (docs/planning.md).
    real_out_tps = out_tps * real_rate_rps(inp) / lam if lam > 0 else out_tps
    cost = pool_cost(
        accelerator=acc.cost,
        inputs=acc.cost_inputs or inp.cost_inputs,
        accelerators=accelerators,
        accelerators_per_replica=apr,
        replicas_total=replicas.total,
        replicas_steady=replicas.steady,
        load_fraction=demand.demand_wt / capacity if capacity > 0 else 0.0,
        output_tokens_per_s=real_out_tps,
        network_bytes_per_s=demand.network,
        out_tps_per_replica=op.out_tps_per_replica,
    )
    steps.extend(cost.steps)
    assumptions = (
        f"residence = TTFT + output × TPOT with {latency_source}; p99 latencies make residence and concurrency "
        f"upper bounds",
        f"cancellation: {num(c)} of requests are cancelled and generate on average half their output",
        *demand.notes,
        *_fixed_assumptions(inp, op),
        *cost.assumptions,
        *(["cost: no accelerator price was entered, so the accelerator line is 0"] if acc.cost.per_hour() == 0 else []),
        *_fit_warnings(demand),
    )
    steady = replicas.steady
    warnings = [
        w
        for w in (
            context_warning(demand.context_exceeded, demand.simulated, m.context_length, paired(inp)),
            prefill_warning(prefill, replicas.for_load) if prefill is not None else None,
        )
        if w is not None
    ]
    warnings += implausible_warnings(
        residence_s=residence,
        accelerators=accelerators,
        accelerator=acc.slug,
        fleet_accelerators=(inp.fleet_accelerators or {}).get(acc.slug),
    )
    prefill_note = (
        f"prefill: at most {prefill.formula.split(';')[0]}"
        if prefill is not None
        else f"prefill: no compute bound (the catalogue lacks {acc.slug}'s dense FLOP/s or {m.slug}'s active parameters)"
    )
    return SizingResult(
        warnings=tuple(warnings),
        input_tokens_per_s=in_tps,
        uncached_input_tokens_per_s=uncached,
        output_tokens_per_s=out_tps,
        mean_residence_s=residence,
        mean_concurrency=concurrency,
        kv_tokens_p99=demand.kv.kv_tokens_p99,
        kv_bytes_p99=demand.kv.kv_tokens_p99 * m.kv_bytes_per_token,
        network_bytes_per_s=demand.network,
        capacity_units=demand.demand_wt / m.r_wt_per_s,
        replicas=replicas,
        accelerators=accelerators,
        cost=cost,
        assumptions=(*assumptions, prefill_note),
        operating_point_used=op,
        steps=tuple(steps),
        kv=demand.kv,
        kv_capacity_tokens_per_replica=demand.kv_cap,
        kv_tokens_p99_per_replica=demand.kv_need / steady if steady else 0.0,
        kv_fits=demand.kv_need <= steady * demand.kv_cap
        and demand.kv.largest_request_kv_tokens <= demand.kv_cap_instance,
        ttft_s=ttft,
        tpot_s=tpot,
        prefill_concurrency=lam * ttft,
        decode_concurrency=decode_c,
        demand_wt_per_s=demand.demand_wt,
        goodput_wt_per_s_per_replica=demand.goodput_wt,
        goodput_cu_per_replica=demand.goodput_wt / m.r_wt_per_s,
        accelerator=acc.slug,
        failure_policy=str(policy),
    )


@dataclass(frozen=True, eq=False)
class _Demand:
    kv: KvSimulation
    context_exceeded: int
    simulated: int
    kv_need: float
    kv_cap: float
    kv_cap_instance: float
    demand_wt: float
    wt_per_request: float
    goodput_wt: float
    network: float
    notes: tuple[str, ...]


class _StepFn(Protocol):
    def __call__(self, name: str, value: float, unit: str, formula: str) -> float: ...


def _kv_and_load(
    inp: SizingInput,
    op: OperatingPoint,
    acc: AcceleratorSpec,
    ttft: float,
    tpot: float,
    uncached: float,
    cached: float,
    out_tps: float,
    out_eff: float,
    mean_p: float,
    step: _StepFn,
) -> _Demand:
    m, lam = inp.model, inp.arrival_rate_rps
    kv_demand = simulate_class(inp, ttft, tpot)
    kv = kv_demand.sim
    step(
        "simulated mean concurrency",
        kv.mean_concurrency,
        "requests",
        f"{num(kv.mean_concurrency)} requests in flight on average in the simulation; Little's law check: "
        f"{num(lam)} req/s × {num(kv.mean_residence_s)} s simulated mean residence = {num(lam * kv.mean_residence_s)}",
    )
    step(
        "KV tokens p99",
        kv.kv_tokens_p99,
        "tokens",
        f"{num(kv.kv_tokens_p99)} = 99th percentile over time of concurrent KV tokens in the simulation ({kv.requests:,} requests)",
    )
    step(
        "KV bytes p99",
        kv.kv_tokens_p99 * m.kv_bytes_per_token,
        "bytes",
        f"{num(kv.kv_tokens_p99 * m.kv_bytes_per_token)} = {num(kv.kv_tokens_p99)} tokens × {num(m.kv_bytes_per_token)} bytes/token",
    )
    inst = op.instances_per_replica
    kv_cap = kv_capacity_tokens(m, acc, op.accelerators_per_replica, inst)
    weights = f"{inst} × weights {num(m.weights_gb)} GB" if inst > 1 else f"weights {num(m.weights_gb)} GB"
    step(
        "KV capacity per replica",
        kv_cap,
        "tokens",
        f"{num(kv_cap)} = ({op.accelerators_per_replica} × {num(acc.memory_gb)} GB − {weights}) "
        f"× 1e9 ÷ {num(m.kv_bytes_per_token)} bytes/token",
    )
    net = inp.network
    per_req = (
        (mean_p + out_eff) * net.bytes_per_token
        + net.overhead_bytes_per_request
        + out_eff * net.stream_bytes_per_output_token
    )
    network = step(
        "network bytes/s",
        lam * per_req,
        "bytes/s",
        f"{num(lam * per_req)} = {num(lam)} req/s × (({num(mean_p)} + {num(out_eff)}) tokens × {num(net.bytes_per_token)} B "
        f"+ {num(net.overhead_bytes_per_request)} B per request + {num(out_eff)} × {num(net.stream_bytes_per_output_token)} B stream framing)",
    )
    demand_wt = step(
        "demand",
        uncached + m.w_cached * cached + m.w_out * out_tps,
        "wt/s",
        f"{num(uncached + m.w_cached * cached + m.w_out * out_tps)} wt/s = {num(uncached)} uncached + {num(m.w_cached)} × "
        f"{num(cached)} cached + {num(m.w_out)} × {num(out_tps)} output tokens/s",
    )
    step(
        "capacity units",
        demand_wt / m.r_wt_per_s,
        "CU",
        f"{num(demand_wt / m.r_wt_per_s)} CU = {num(demand_wt)} wt/s ÷ R {num(m.r_wt_per_s)} wt/s",
    )
    mix = op.ref_mix
    goodput = replica_goodput_wt_per_s(out_tps_at_slo=op.out_tps_per_replica, mix=mix, w_out=m.w_out)
    step(
        "goodput per replica",
        goodput,
        "wt/s",
        f"{num(goodput)} wt/s = "
        f"{num(op.out_tps_per_replica)} output tok/s × ({num(m.w_out)} + {num(mix.mean_prompt)} ÷ {num(mix.mean_output)})",
    )
    wt_per_request = (1 - inp.cache_hit_ratio) * mean_p + m.w_cached * inp.cache_hit_ratio * mean_p + m.w_out * out_eff
    return _Demand(
        kv=kv,
        context_exceeded=kv_demand.context_exceeded,
        simulated=kv_demand.requests,
        kv_need=kv.kv_tokens_p99 * inp.lb_unevenness,
        kv_cap=kv_cap,
        kv_cap_instance=kv_cap / inst,
        demand_wt=demand_wt,
        wt_per_request=wt_per_request,
        goodput_wt=goodput,
        network=network,
        notes=kv_demand.assumptions,
    )


def _replicas(
    inp: SizingInput, policy: FailurePolicy, d: _Demand, prefill: PrefillBound | None, step: _StepFn
) -> Replicas:
    u, lb = inp.utilization_target, inp.lb_unevenness
    per_replica = d.goodput_wt * u
    for_load = ceil_whole(d.demand_wt / per_replica * lb)
    step(
        "replicas for load",
        for_load,
        "replicas",
        f"{for_load} = ⌈{num(d.demand_wt)} wt/s ÷ ({num(d.goodput_wt)} wt/s × utilization {num(u)}) × unevenness {num(lb)}⌉",
    )
    for_kv = ceil_whole(d.kv_need / d.kv_cap)
    step(
        "replicas for KV memory",
        for_kv,
        "replicas",
        f"{for_kv} = ⌈{num(d.kv.kv_tokens_p99)} KV tokens p99 × unevenness {num(lb)} ÷ {num(d.kv_cap)} tokens per replica⌉",
    )
    steady = max(for_load, for_kv)
    if prefill is None:
        step("steady replicas", steady, "replicas", f"{steady} = max({for_load} for load, {for_kv} for KV memory)")
    else:
        step("replicas for prefill", prefill.replicas, "replicas", prefill.formula)
        steady = max(steady, prefill.replicas)
        step(
            "steady replicas",
            steady,
            "replicas",
            f"{steady} = max({for_load} for load, {for_kv} for KV memory, {prefill.replicas} for prefill)",
        )
    with_failure = replicas_for_failure(steady, policy, inp.zones)
    rule = {
        "zone": f"⌈{steady} × {inp.zones} ÷ ({inp.zones} − 1)⌉",
        "replica": f"{steady} + {policy.n}",
        "fraction": f"fewest n with n − ⌈{num(policy.f)} × n⌉ ≥ {steady}",
        "none": f"{steady}",
    }[policy.kind]
    step("replicas with failure", with_failure, "replicas", f"{with_failure} = {rule} ({policy.describe()})")
    ramp_rps = inp.ramp_rps_per_minute * inp.startup_minutes
    reserve = ceil_whole(ramp_rps * d.wt_per_request / per_replica * lb)
    step(
        "startup reserve",
        reserve,
        "replicas",
        f"{reserve} = ⌈{num(inp.ramp_rps_per_minute)} req/s per minute × {num(inp.startup_minutes)} min startup × "
        f"{num(d.wt_per_request)} wt per request ÷ ({num(d.goodput_wt)} wt/s × {num(u)}) × {num(lb)}⌉",
    )
    total = with_failure + reserve
    step("total replicas", total, "replicas", f"{total} = {with_failure} with failure + {reserve} startup reserve")
    return Replicas(steady, with_failure, reserve, total, for_load, for_kv)


def _fixed_assumptions(inp: SizingInput, op: OperatingPoint) -> list[str]:
    net = inp.network
    return [
        f"goodput uses the operating point's reference mix ({num(op.ref_mix.mean_prompt)} prompt, "
        f"{num(op.ref_mix.mean_output)} output tokens per request), not this class's mix (CONTRACT §1)",
        "KV memory per replica = accelerators × memory − one copy of the weights (GB = 1e9 bytes); no activation "
        "or runtime reserve is subtracted",
        f"KV per replica = the class's p99 concurrent KV × load-balancer unevenness {num(inp.lb_unevenness)} ÷ "
        f"replicas: KV is assumed to spread over replicas like requests do",
        f"network: {num(net.bytes_per_token)} bytes of text per token in and out, {num(net.overhead_bytes_per_request)} "
        f"bytes of protocol overhead per request, {num(net.stream_bytes_per_output_token)} bytes of stream framing per "
        f"output token",
        f"startup reserve covers {num(inp.ramp_rps_per_minute)} req/s of growth per minute over "
        f"{num(inp.startup_minutes)} minutes of replica startup",
    ]


def _fit_warnings(d: _Demand) -> list[str]:
    largest = d.kv.largest_request_kv_tokens
    if largest <= d.kv_cap_instance:
        return []
    return [
        f"WARNING: the largest simulated request needs {num(largest)} KV tokens, more than one model instance "
        f"holds ({num(d.kv_cap_instance)}); such requests cannot be served on this operating point"
    ]
