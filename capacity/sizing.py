"""Size one request class (CONTRACT §3): rates, residence, concurrency, KV tail, replicas, cost.

`size()` is the entry point. Every intermediate number is also returned as a `Step` whose formula
repeats the actual numbers, so a page can show the whole derivation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from capacity.cost import accelerators_for, pool_cost
from capacity.failure import FailurePolicy, replicas_for_failure
from capacity.input_errors import SizingInputError
from capacity.kv_demand import mean_lengths, simulate_class
from capacity.kvsim import KvSimulation
from capacity.lengths import LengthQuantiles, LengthSamples, LengthSpec
from capacity.operating_points import OperatingPoint, Slo, choose_operating_point, latencies_used
from capacity.sizing_inputs import AcceleratorSpec, ModelSpec, NetworkModel, SizingInput, validate
from capacity.sizing_result import Replicas, SizingResult
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


def kv_capacity_tokens(model: ModelSpec, acc: AcceleratorSpec, accelerators_per_replica: int) -> float:
    """KV tokens one replica can hold: its memory less one copy of the weights (GB = 1e9 bytes)."""
    free_gb = acc.memory_gb * accelerators_per_replica - model.weights_gb
    if free_gb <= 0:
        raise SizingInputError(
            "model.weights_gb",
            f"weights {num(model.weights_gb)} GB do not fit in {accelerators_per_replica} × "
            f"{num(acc.memory_gb)} GB of {acc.slug}",
        )
    return float(int(free_gb * GB // model.kv_bytes_per_token))


def size(inp: SizingInput) -> SizingResult:
    """Size one request class. Raises SizingInputError naming the first bad field."""
    policy = validate(inp)
    m, lam = inp.model, inp.arrival_rate_rps
    choice = choose_operating_point(
        inp.operating_points,
        inp.slo,
        model=m.slug,
        w_out=m.w_out,
        accelerator=inp.accelerator,
        allow_ceiling=inp.allow_ceiling,
    )
    op = choice.point
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
    replicas = _replicas(inp, policy, demand, step)
    accelerators = accelerators_for(replicas.total, apr, acc.chips_per_slice)
    step(
        "accelerators",
        accelerators,
        "accelerators",
        f"{accelerators} = {replicas.total} replicas × {apr} per replica, in whole slices of {acc.chips_per_slice}",
    )
    capacity = replicas.total * demand.goodput_wt
    cost = pool_cost(
        accelerator=acc.cost,
        inputs=inp.cost_inputs,
        accelerators=accelerators,
        accelerators_per_replica=apr,
        replicas_total=replicas.total,
        replicas_steady=replicas.steady,
        load_fraction=demand.demand_wt / capacity if capacity > 0 else 0.0,
        output_tokens_per_s=out_tps,
        network_bytes_per_s=demand.network,
        out_tps_per_replica=op.out_tps_per_replica,
    )
    steps.extend(cost.steps)
    assumptions = (
        *choice.assumptions,
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
    return SizingResult(
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
        assumptions=assumptions,
        operating_point_used=op,
        steps=tuple(steps),
        kv=demand.kv,
        kv_capacity_tokens_per_replica=demand.kv_cap,
        kv_tokens_p99_per_replica=demand.kv_need / steady if steady else 0.0,
        kv_fits=demand.kv_need <= steady * demand.kv_cap and demand.kv.largest_request_kv_tokens <= demand.kv_cap,
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
    kv_need: float
    kv_cap: float
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
    kv_cap = kv_capacity_tokens(m, acc, op.accelerators_per_replica)
    step(
        "KV capacity per replica",
        kv_cap,
        "tokens",
        f"{num(kv_cap)} = ({op.accelerators_per_replica} × {num(acc.memory_gb)} GB − weights {num(m.weights_gb)} GB) "
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
        kv_need=kv.kv_tokens_p99 * inp.lb_unevenness,
        kv_cap=kv_cap,
        demand_wt=demand_wt,
        wt_per_request=wt_per_request,
        goodput_wt=goodput,
        network=network,
        notes=kv_demand.assumptions,
    )


def _replicas(inp: SizingInput, policy: FailurePolicy, d: _Demand, step: _StepFn) -> Replicas:
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
    step("steady replicas", steady, "replicas", f"{steady} = max({for_load} for load, {for_kv} for KV memory)")
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
    if largest <= d.kv_cap:
        return []
    return [
        f"WARNING: the largest simulated request needs {num(largest)} KV tokens, more than one replica holds "
        f"({num(d.kv_cap)}); such requests cannot be served on this operating point"
    ]
