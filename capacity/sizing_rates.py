"""The figures one sizing works with on one operating point: the derivation's steps, the class's rates,
its KV and load demand, and the real (mean) rate a trace runs at. Moved out of capacity/sizing.py."""

from __future__ import annotations

from dataclasses import dataclass

from capacity.kv_demand import mean_lengths
from capacity.kvsim import KvSimulation
from capacity.sizing_inputs import SizingInput
from capacity.steps import Step, num


class Steps:
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
class Rates:
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


def rates(inp: SizingInput, ttft: float, tpot: float, st: Steps) -> Rates:
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
    return Rates(
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


@dataclass(frozen=True, eq=False)
class Demand:
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


def real_rate_rps(inp: SizingInput) -> float:
    """The workload's real volume: a trace replayed at its own timing runs at its mean rate
    (requests ÷ duration), whatever planning rate sized the fleet."""
    t = inp.arrival_times_s
    if inp.trace_own_timing and t is not None and len(t) > 1:
        return len(t) / max(float(t.max() - t.min()), 1.0)
    return inp.arrival_rate_rps
