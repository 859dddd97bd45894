"""The texts of one sizing: its assumptions and warnings (moved out of capacity/sizing.py)."""

from __future__ import annotations

from capacity.cost import PoolCost
from capacity.kv_demand import paired
from capacity.operating_points import OperatingPoint
from capacity.sizing_checks import (
    PrefillBound,
    SizingWarning,
    context_warning,
    implausible_warnings,
    prefill_warning,
)
from capacity.sizing_inputs import AcceleratorSpec, SizingInput
from capacity.sizing_rates import Demand, Rates
from capacity.steps import num


def sizing_assumptions(
    inp: SizingInput,
    op: OperatingPoint,
    acc: AcceleratorSpec,
    latency_source: str,
    d: Demand,
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
        *fixed_assumptions(inp, op),
        *cost.assumptions,
        *(["cost: no accelerator price was entered, so the accelerator line is 0"] if acc.cost.per_hour() == 0 else []),
        *fit_warnings(d),
        prefill_note,
    )


def sizing_warnings(
    inp: SizingInput,
    acc: AcceleratorSpec,
    r: Rates,
    d: Demand,
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


def fixed_assumptions(inp: SizingInput, op: OperatingPoint) -> list[str]:
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


def fit_warnings(d: Demand) -> list[str]:
    largest = d.kv.largest_request_kv_tokens
    if largest <= d.kv_cap_instance:
        return []
    return [
        f"WARNING: the largest simulated request needs {num(largest)} KV tokens, more than one model instance "
        f"holds ({num(d.kv_cap_instance)}); such requests cannot be served on this operating point"
    ]
