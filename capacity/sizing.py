"""Size one request class (docs/contract.md §3): rates, residence, concurrency, KV tail, replicas, cost.

`size()` is the entry point. Every intermediate number is also returned as a `Step` whose formula
repeats the actual numbers, so a page can show the whole derivation.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from capacity.cost import PoolCost, accelerators_for, pool_cost
from capacity.failure import FailurePolicy, replicas_for_failure
from capacity.input_errors import SizingInputError
from capacity.kv_demand import KvDemand, mean_lengths, paired, rate_free, simulate_class
from capacity.kvsim import KvSimulation
from capacity.lengths import LengthQuantiles, LengthSamples, LengthSpec
from capacity.operating_points import OperatingPoint, Slo, describe_point, feasible_points, latencies_used
from capacity.planning import PlanningAnswer, plan
from capacity.planning_workload import trace_workload
from capacity.realisations import envelope_answer
from capacity.sizing_checks import (
    PrefillBound,
    SizingWarning,
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


def real_rate_rps(inp: SizingInput) -> float:
    """The workload's real volume: a trace replayed at its own timing runs at its mean rate
    (requests ÷ duration), whatever planning rate sized the fleet."""
    t = inp.arrival_times_s
    if inp.trace_own_timing and t is not None and len(t) > 1:
        return len(t) / max(float(t.max() - t.min()), 1.0)
    return inp.arrival_rate_rps


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


class _Steps:
    """The derivation in the order it is computed; each value is computed once, for itself and its formula."""

    def __init__(self) -> None:
        self.steps: list[Step] = []

    def add(self, name: str, value: float, unit: str, formula: str) -> float:
        self.steps.append(Step(name, value, unit, formula))
        return value

    def eq(self, name: str, value: float, unit: str, rhs: str, lead: str = "") -> float:
        """A step whose formula reads "value[lead] = rhs"."""
        return self.add(name, value, unit, f"{num(value)}{lead} = {rhs}")

    def whole(self, name: str, value: int, unit: str, rhs: str) -> int:
        """A count (replicas, accelerators), written as a plain integer."""
        self.steps.append(Step(name, value, unit, f"{value} = {rhs}"))
        return value


@dataclass(frozen=True)
class _Rates:
    """The class's rates on one operating point's latencies (`cached` = input tokens/s × cache hit)."""

    lam: float
    ttft: float
    tpot: float
    mean_p: float
    out_eff: float
    in_tps: float
    uncached: float
    cached: float
    out_tps: float
    residence: float
    prefill_c: float
    decode_c: float
    concurrency: float


def _rates(inp: SizingInput, ttft: float, tpot: float, st: _Steps) -> _Rates:
    lam, h, c = inp.arrival_rate_rps, inp.cache_hit_ratio, inp.cancellation_ratio
    mean_p, mean_o = mean_lengths(inp)
    out_eff = st.eq(
        "output tokens per request",
        mean_o * (1 - c / 2),
        "tokens",
        f"mean output {num(mean_o)} × (1 − cancelled {num(c)} ÷ 2)",
    )
    in_tps = st.eq("input tokens/s", lam * mean_p, "tokens/s", f"{num(lam)} req/s × {num(mean_p)} prompt tokens")
    uncached = st.eq(
        "uncached input tokens/s", in_tps * (1 - h), "tokens/s", f"{num(in_tps)} tokens/s × (1 − cache hit {num(h)})"
    )
    out_tps = st.eq("output tokens/s", lam * out_eff, "tokens/s", f"{num(lam)} req/s × {num(out_eff)} tokens")
    residence = st.eq(
        "mean residence",
        ttft + out_eff * tpot,
        "s",
        f"TTFT {num(ttft)} s + {num(out_eff)} tokens × TPOT {num(tpot)} s",
        lead=" s",
    )
    prefill_c = st.eq("prefill concurrency", lam * ttft, "requests", f"{num(lam)} req/s × TTFT {num(ttft)} s")
    decode_c = st.eq(
        "decode concurrency", lam * out_eff * tpot, "requests", f"{num(lam)} req/s × {num(out_eff * tpot)} s decoding"
    )
    concurrency = st.eq("mean concurrency", lam * residence, "requests", f"{num(lam)} req/s × {num(residence)} s")
    return _Rates(
        lam,
        ttft,
        tpot,
        mean_p,
        out_eff,
        in_tps,
        uncached,
        in_tps * h,
        out_tps,
        residence,
        prefill_c,
        decode_c,
        concurrency,
    )


class KvReplays:
    """KV simulations of one class, by latencies (and rate, where the replay depends on it): points
    with the same TTFT and TPOT replay the same requests; the peak's extra cost re-sizes the chosen
    point at a trace's mean rate, and the calculator sizes the class at each planning basis — a trace
    at its own timing replays identically at any rate, so each point is simulated once for them all.

    One object serves inputs that differ at most in `arrival_rate_rps`: any other field (its arrays
    by identity) differing from the first input's is a ValueError, since a replay keyed by latencies
    alone would then answer for another class."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[float | None, float, float], KvDemand] = {}
        self._class: SizingInput | None = None

    def get(self, inp: SizingInput, ttft: float, tpot: float) -> KvDemand:
        self._check_class(inp)
        rate = None if inp.arrival_rate_rps > 0 and rate_free(inp) else inp.arrival_rate_rps
        key = (rate, ttft, tpot)
        if key not in self._by_key:
            self._by_key[key] = simulate_class(inp, ttft, tpot)
        return self._by_key[key]

    def _check_class(self, inp: SizingInput) -> None:
        if self._class is None:
            self._class = inp
            return
        for f in fields(inp):
            if f.name == "arrival_rate_rps":
                continue
            mine, theirs = getattr(self._class, f.name), getattr(inp, f.name)
            same = mine is theirs if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray) else mine == theirs
            if not same:
                raise ValueError(f"KvReplays: {f.name} differs from the class these replays are for")


def _size_at(
    inp: SizingInput, policy: FailurePolicy, op: OperatingPoint, sims: KvReplays | None = None
) -> SizingResult:
    """The whole sizing on one operating point."""
    m, acc, apr = inp.model, _accelerator_for(inp, op), op.accelerators_per_replica
    ttft, tpot, latency_source = latencies_used(op, inp.slo)
    st = _Steps()
    r = _rates(inp, ttft, tpot, st)
    kv_demand = (sims or KvReplays()).get(inp, ttft, tpot)
    demand = _kv_and_load(inp, op, acc, r, kv_demand, st)
    prefill = prefill_bound(
        accelerators_per_replica=apr,
        dense_tflops=acc.dense_tflops,
        active_params_b=m.active_params_b,
        mfu=inp.prefill_mfu,
        uncached_prompt_tps=r.uncached,
        utilization=inp.utilization_target,
        lb_unevenness=inp.lb_unevenness,
    )
    replicas = _replicas(inp, policy, demand, prefill, st)
    accelerators = st.whole(
        "accelerators",
        accelerators_for(replicas.total, apr, acc.chips_per_slice),
        "accelerators",
        f"{replicas.total} replicas × {apr} per replica, in whole slices of {acc.chips_per_slice}",
    )
    cost = _cost(inp, op, acc, r, demand, replicas, accelerators)
    st.steps.extend(cost.steps)
    steady = replicas.steady
    return SizingResult(
        warnings=_warnings(inp, acc, r, demand, prefill, replicas.for_load, accelerators),
        input_tokens_per_s=r.in_tps,
        uncached_input_tokens_per_s=r.uncached,
        output_tokens_per_s=r.out_tps,
        mean_residence_s=r.residence,
        mean_concurrency=r.concurrency,
        kv_tokens_p99=demand.kv.kv_tokens_p99,
        kv_bytes_p99=demand.kv.kv_tokens_p99 * m.kv_bytes_per_token,
        network_bytes_per_s=demand.network,
        capacity_units=demand.demand_wt / m.r_wt_per_s,
        replicas=replicas,
        accelerators=accelerators,
        cost=cost,
        assumptions=_assumptions(inp, op, acc, latency_source, demand, cost, prefill),
        operating_point_used=op,
        steps=tuple(st.steps),
        kv=demand.kv,
        kv_capacity_tokens_per_replica=demand.kv_cap,
        kv_tokens_p99_per_replica=demand.kv_need / steady if steady else 0.0,
        kv_fits=demand.kv_need <= steady * demand.kv_cap
        and demand.kv.largest_request_kv_tokens <= demand.kv_cap_instance,
        ttft_s=ttft,
        tpot_s=tpot,
        prefill_concurrency=r.prefill_c,
        decode_concurrency=r.decode_c,
        demand_wt_per_s=demand.demand_wt,
        goodput_wt_per_s_per_replica=demand.goodput_wt,
        goodput_cu_per_replica=demand.goodput_wt / m.r_wt_per_s,
        accelerator=acc.slug,
        failure_policy=str(policy),
    )


def _cost(
    inp: SizingInput,
    op: OperatingPoint,
    acc: AcceleratorSpec,
    r: _Rates,
    d: _Demand,
    replicas: Replicas,
    accelerators: int,
) -> PoolCost:
    capacity = replicas.total * d.goodput_wt
    # Cost per useful token over the real volume: the fleet is sized for the planning rate, but
    # only the mean rate's tokens are ever produced (docs/planning.md).
    real_out_tps = r.out_tps * real_rate_rps(inp) / r.lam if r.lam > 0 else r.out_tps
    return pool_cost(
        accelerator=acc.cost,
        inputs=acc.cost_inputs or inp.cost_inputs,
        accelerators=accelerators,
        accelerators_per_replica=op.accelerators_per_replica,
        replicas_total=replicas.total,
        replicas_steady=replicas.steady,
        load_fraction=d.demand_wt / capacity if capacity > 0 else 0.0,
        output_tokens_per_s=real_out_tps,
        network_bytes_per_s=d.network,
        out_tps_per_replica=op.out_tps_per_replica,
    )


def _assumptions(
    inp: SizingInput,
    op: OperatingPoint,
    acc: AcceleratorSpec,
    latency_source: str,
    d: _Demand,
    cost: PoolCost,
    prefill: PrefillBound | None,
) -> tuple[str, ...]:
    prefill_note = (
        f"prefill: at most {prefill.formula.split(';')[0]}"
        if prefill is not None
        else f"prefill: no compute bound (the catalogue lacks {acc.slug}'s dense FLOP/s or {inp.model.slug}'s active parameters)"
    )
    return (
        f"residence = TTFT + output × TPOT with {latency_source}; p99 latencies make residence and concurrency "
        f"upper bounds",
        f"cancellation: {num(inp.cancellation_ratio)} of requests are cancelled and generate on average half their output",
        *d.notes,
        *_fixed_assumptions(inp, op),
        *cost.assumptions,
        *(["cost: no accelerator price was entered, so the accelerator line is 0"] if acc.cost.per_hour() == 0 else []),
        *_fit_warnings(d),
        prefill_note,
    )


def _warnings(
    inp: SizingInput,
    acc: AcceleratorSpec,
    r: _Rates,
    d: _Demand,
    prefill: PrefillBound | None,
    for_load: int,
    accelerators: int,
) -> tuple[SizingWarning, ...]:
    found = [
        w
        for w in (
            context_warning(d.context_exceeded, d.simulated, inp.model.context_length, paired(inp)),
            prefill_warning(prefill, for_load) if prefill is not None else None,
        )
        if w is not None
    ]
    found += implausible_warnings(
        residence_s=r.residence,
        accelerators=accelerators,
        accelerator=acc.slug,
        fleet_accelerators=(inp.fleet_accelerators or {}).get(acc.slug),
    )
    return tuple(found)


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


def _kv_and_load(
    inp: SizingInput, op: OperatingPoint, acc: AcceleratorSpec, r: _Rates, kv_demand: KvDemand, st: _Steps
) -> _Demand:
    m, lam, kv = inp.model, r.lam, kv_demand.sim
    st.add(
        "simulated mean concurrency",
        kv.mean_concurrency,
        "requests",
        f"{num(kv.mean_concurrency)} requests in flight on average in the simulation; Little's law check: "
        f"{num(lam)} req/s × {num(kv.mean_residence_s)} s simulated mean residence = {num(lam * kv.mean_residence_s)}",
    )
    st.eq(
        "KV tokens p99",
        kv.kv_tokens_p99,
        "tokens",
        f"99th percentile over time of concurrent KV tokens in the simulation ({kv.requests:,} requests)",
    )
    st.eq(
        "KV bytes p99",
        kv.kv_tokens_p99 * m.kv_bytes_per_token,
        "bytes",
        f"{num(kv.kv_tokens_p99)} tokens × {num(m.kv_bytes_per_token)} bytes/token",
    )
    inst = op.instances_per_replica
    weights = f"{inst} × weights {num(m.weights_gb)} GB" if inst > 1 else f"weights {num(m.weights_gb)} GB"
    kv_cap = st.eq(
        "KV capacity per replica",
        kv_capacity_tokens(m, acc, op.accelerators_per_replica, inst),
        "tokens",
        f"({op.accelerators_per_replica} × {num(acc.memory_gb)} GB − {weights}) "
        f"× 1e9 ÷ {num(m.kv_bytes_per_token)} bytes/token",
    )
    net, mean_p, out_eff = inp.network, r.mean_p, r.out_eff
    per_req = (
        (mean_p + out_eff) * net.bytes_per_token
        + net.overhead_bytes_per_request
        + out_eff * net.stream_bytes_per_output_token
    )
    network = st.eq(
        "network bytes/s",
        lam * per_req,
        "bytes/s",
        f"{num(lam)} req/s × (({num(mean_p)} + {num(out_eff)}) tokens × {num(net.bytes_per_token)} B "
        f"+ {num(net.overhead_bytes_per_request)} B per request + {num(out_eff)} × {num(net.stream_bytes_per_output_token)} B stream framing)",
    )
    demand_wt = st.eq(
        "demand",
        r.uncached + m.w_cached * r.cached + m.w_out * r.out_tps,
        "wt/s",
        f"{num(r.uncached)} uncached + {num(m.w_cached)} × "
        f"{num(r.cached)} cached + {num(m.w_out)} × {num(r.out_tps)} output tokens/s",
        lead=" wt/s",
    )
    st.eq(
        "capacity units", demand_wt / m.r_wt_per_s, "CU", f"{num(demand_wt)} wt/s ÷ R {num(m.r_wt_per_s)} wt/s", " CU"
    )
    mix = op.ref_mix
    goodput = st.eq(
        "goodput per replica",
        replica_goodput_wt_per_s(out_tps_at_slo=op.out_tps_per_replica, mix=mix, w_out=m.w_out),
        "wt/s",
        f"{num(op.out_tps_per_replica)} output tok/s × ({num(m.w_out)} + {num(mix.mean_prompt)} ÷ {num(mix.mean_output)})",
        lead=" wt/s",
    )
    h = inp.cache_hit_ratio
    wt_per_request = (1 - h) * mean_p + m.w_cached * h * mean_p + m.w_out * out_eff
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
    inp: SizingInput, policy: FailurePolicy, d: _Demand, prefill: PrefillBound | None, st: _Steps
) -> Replicas:
    u, lb = inp.utilization_target, inp.lb_unevenness
    per_replica = d.goodput_wt * u
    for_load = st.whole(
        "replicas for load",
        ceil_whole(d.demand_wt / per_replica * lb),
        "replicas",
        f"⌈{num(d.demand_wt)} wt/s ÷ ({num(d.goodput_wt)} wt/s × utilization {num(u)}) × unevenness {num(lb)}⌉",
    )
    for_kv = st.whole(
        "replicas for KV memory",
        ceil_whole(d.kv_need / d.kv_cap),
        "replicas",
        f"⌈{num(d.kv.kv_tokens_p99)} KV tokens p99 × unevenness {num(lb)} ÷ {num(d.kv_cap)} tokens per replica⌉",
    )
    if prefill is None:
        steady = st.whole(
            "steady replicas", max(for_load, for_kv), "replicas", f"max({for_load} for load, {for_kv} for KV memory)"
        )
    else:
        st.add("replicas for prefill", prefill.replicas, "replicas", prefill.formula)
        steady = st.whole(
            "steady replicas",
            max(for_load, for_kv, prefill.replicas),
            "replicas",
            f"max({for_load} for load, {for_kv} for KV memory, {prefill.replicas} for prefill)",
        )
    rule = {
        "zone": f"⌈{steady} × {inp.zones} ÷ ({inp.zones} − 1)⌉",
        "replica": f"{steady} + {policy.n}",
        "fraction": f"fewest n with n − ⌈{num(policy.f)} × n⌉ ≥ {steady}",
        "none": f"{steady}",
    }[policy.kind]
    with_failure = st.whole(
        "replicas with failure",
        replicas_for_failure(steady, policy, inp.zones),
        "replicas",
        f"{rule} ({policy.describe()})",
    )
    ramp_rps = inp.ramp_rps_per_minute * inp.startup_minutes
    reserve = st.whole(
        "startup reserve",
        ceil_whole(ramp_rps * d.wt_per_request / per_replica * lb),
        "replicas",
        f"⌈{num(inp.ramp_rps_per_minute)} req/s per minute × {num(inp.startup_minutes)} min startup × "
        f"{num(d.wt_per_request)} wt per request ÷ ({num(d.goodput_wt)} wt/s × {num(u)}) × {num(lb)}⌉",
    )
    total = st.whole(
        "total replicas", with_failure + reserve, "replicas", f"{with_failure} with failure + {reserve} startup reserve"
    )
    return Replicas(steady, with_failure, reserve, total, for_load, for_kv)


def _fixed_assumptions(inp: SizingInput, op: OperatingPoint) -> list[str]:
    net = inp.network
    return [
        f"goodput uses the operating point's reference mix ({num(op.ref_mix.mean_prompt)} prompt, "
        f"{num(op.ref_mix.mean_output)} output tokens per request), not this class's mix (docs/contract.md §1)",
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
