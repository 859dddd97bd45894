"""The default concurrency cap of an entitlement (issue 15.5): Little's law × a burst factor, never
above the entitlement's share of its pool's KV memory.

    requests/s    = CU × R ÷ weighted tokens of the mean request
    residence     = TTFT + mean output × TPOT           (the pool's operating point)
    Little        = requests/s × residence             (requests in flight on average at the full rate)
    burst cap     = ⌈Little × burst factor⌉
    KV ceiling    = ⌊CU ÷ pool CU × replicas × KV tokens per replica ÷ KV tokens of the mean request⌋
    cap           = max(1, min(burst cap, KV ceiling))

Where the operating point publishes only p99 latencies, residence uses them and is an upper bound:
the cap is then generous on time and the KV ceiling is what binds a heavy class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from capacity.steps import num


@dataclass(frozen=True)
class ConcurrencyCap:
    value: int
    requests_per_s: float
    residence_s: float
    little: float
    burst_factor: float
    burst_cap: int
    kv_ceiling: int
    binding: str  # "burst" or "kv"
    latency_source: str
    formula: str

    def to_dict(self) -> dict[str, object]:
        return {
            "value": self.value,
            "requests_per_s": self.requests_per_s,
            "residence_s": self.residence_s,
            "littles_law": self.little,
            "burst_factor": self.burst_factor,
            "burst_cap": self.burst_cap,
            "kv_ceiling": self.kv_ceiling,
            "binding": self.binding,
            "latency_source": self.latency_source,
            "formula": self.formula,
        }


def concurrency_cap(
    *,
    cu: float,
    r_wt_per_s: float,
    w_out: float,
    prompt_mean: float,
    output_mean: float,
    ttft_s: float,
    tpot_s: float,
    latency_source: str,
    burst_factor: float,
    pool_cu: float,
    replicas: int,
    kv_tokens_per_replica: float,
) -> ConcurrencyCap:
    if cu <= 0 or pool_cu <= 0 or burst_factor < 1:
        raise ValueError("need CU > 0, pool CU > 0 and a burst factor ≥ 1")
    wt_per_request = prompt_mean + w_out * output_mean
    rps = cu * r_wt_per_s / wt_per_request
    residence = ttft_s + output_mean * tpot_s
    little = rps * residence
    burst_cap = math.ceil(little * burst_factor - 1e-9)
    share = cu / pool_cu
    kv_ceiling = math.floor(share * replicas * kv_tokens_per_replica / (prompt_mean + output_mean))
    value = max(1, min(burst_cap, kv_ceiling))
    binding = "kv" if kv_ceiling < burst_cap else "burst"
    formula = (
        f"{value} = max(1, min(⌈{num(rps)} req/s × {num(residence)} s × burst {num(burst_factor)}⌉ = {burst_cap}, "
        f"⌊{num(cu)} ÷ {num(pool_cu)} CU × {replicas} replicas × {num(kv_tokens_per_replica)} KV tokens ÷ "
        f"{num(prompt_mean + output_mean)} tokens per request⌋ = {kv_ceiling})); {num(rps)} req/s = {num(cu)} CU × "
        f"{num(r_wt_per_s)} wt/s ÷ ({num(prompt_mean)} + {num(w_out)} × {num(output_mean)}) wt per request; "
        f"residence = TTFT {num(ttft_s)} s + {num(output_mean)} × TPOT {num(tpot_s)} s ({latency_source})"
    )
    return ConcurrencyCap(
        value=value,
        requests_per_s=rps,
        residence_s=residence,
        little=little,
        burst_factor=burst_factor,
        burst_cap=burst_cap,
        kv_ceiling=kv_ceiling,
        binding=binding,
        latency_source=latency_source,
        formula=formula,
    )
