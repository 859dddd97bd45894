"""The whole sizing on one operating point: rates, KV and load demand, replicas, cost (moved out of
capacity/sizing.py, which picks the cheapest point)."""

from __future__ import annotations

from capacity.cost import PoolCost, accelerators_for, pool_cost
from capacity.failure import FailurePolicy, replicas_for_failure
from capacity.input_errors import SizingInputError
from capacity.kv_demand import KvDemand
from capacity.kv_replays import KvReplays
from capacity.operating_points import OperatingPoint, latencies_used
from capacity.sizing_checks import PrefillBound, prefill_bound
from capacity.sizing_inputs import AcceleratorSpec, ModelSpec, SizingInput
from capacity.sizing_rates import Demand, Rates, Steps, rates, real_rate_rps
from capacity.sizing_result import Replicas, SizingResult
from capacity.sizing_texts import sizing_assumptions, sizing_warnings
from capacity.steps import ceil_whole, num
from capacity.units import replica_goodput_wt_per_s

GB = 1e9


def accelerator_for(inp: SizingInput, point: OperatingPoint) -> AcceleratorSpec:
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


def size_at(inp: SizingInput, policy: FailurePolicy, op: OperatingPoint, sims: KvReplays | None = None) -> SizingResult:
    """The whole sizing on one operating point."""
    m, acc, apr = inp.model, accelerator_for(inp, op), op.accelerators_per_replica
    ttft, tpot, latency_source = latencies_used(op, inp.slo)
    st = Steps()
    r = rates(inp, ttft, tpot, st)
    kv_demand = (sims or KvReplays()).get(inp, ttft, tpot)
    demand = kv_and_load(inp, op, acc, r, kv_demand, st)
    prefill = prefill_bound(
        accelerators_per_replica=apr,
        dense_tflops=acc.dense_tflops,
        active_params_b=m.active_params_b,
        mfu=inp.prefill_mfu,
        uncached_prompt_tps=r.uncached,
        utilization=inp.utilization_target,
        lb_unevenness=inp.lb_unevenness,
    )
    replicas = replicas_for(inp, policy, demand, prefill, st)
    accelerators = st.whole(
        "accelerators",
        accelerators_for(replicas.total, apr, acc.chips_per_slice),
        "accelerators",
        f"{replicas.total} replicas × {apr} per replica, in whole slices of {acc.chips_per_slice}",
    )
    cost = fleet_cost(inp, op, acc, r, demand, replicas, accelerators)
    st.steps.extend(cost.steps)
    steady = replicas.steady
    return SizingResult(
        warnings=sizing_warnings(inp, acc, r, demand, prefill, replicas.for_load, accelerators),
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
        assumptions=sizing_assumptions(inp, op, acc, latency_source, demand, cost, prefill),
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


def fleet_cost(
    inp: SizingInput,
    op: OperatingPoint,
    acc: AcceleratorSpec,
    r: Rates,
    d: Demand,
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


def kv_and_load(
    inp: SizingInput, op: OperatingPoint, acc: AcceleratorSpec, r: Rates, kv_demand: KvDemand, st: Steps
) -> Demand:
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
    return Demand(
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


def replicas_for(
    inp: SizingInput, policy: FailurePolicy, d: Demand, prefill: PrefillBound | None, st: Steps
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
