"""What sizing returns (docs/contract.md §3 outputs plus what a page needs to show its work)."""

from __future__ import annotations

from dataclasses import dataclass

from capacity.cost import PoolCost
from capacity.kvsim import KvSimulation
from capacity.operating_points import OperatingPoint
from capacity.planning import PlanningAnswer
from capacity.sizing_checks import SizingWarning
from capacity.steps import Step, finite_or_none


@dataclass(frozen=True)
class Replicas:
    """`steady` = max(`for_load`, `for_kv`); `total` = `with_failure` + `startup_reserve`."""

    steady: int
    with_failure: int
    startup_reserve: int
    total: int
    for_load: int
    for_kv: int

    def to_dict(self) -> dict[str, int]:
        return {
            "steady": self.steady,
            "with_failure": self.with_failure,
            "startup_reserve": self.startup_reserve,
            "total": self.total,
            "for_load": self.for_load,
            "for_kv": self.for_kv,
        }


@dataclass(frozen=True)
class Alternative:
    """A feasible operating point that lost on cost, with what it would have cost."""

    label: str
    accelerator: str
    accelerators_per_replica: int
    replicas_total: int
    accelerators: int
    cost_per_hour: float
    extra_cost_per_hour: float

    def to_dict(self) -> dict[str, object]:
        return {
            "label": self.label,
            "accelerator": self.accelerator,
            "accelerators_per_replica": self.accelerators_per_replica,
            "replicas_total": self.replicas_total,
            "accelerators": self.accelerators,
            "cost_per_hour": self.cost_per_hour,
            "extra_cost_per_hour": self.extra_cost_per_hour,
        }


@dataclass(frozen=True, eq=False)
class SizingResult:
    """The first thirteen fields are docs/contract.md §3's output. The rest explain them: the operating point
    and latencies used, the per-phase concurrency (prefill = rate × TTFT, decode = rate × output × TPOT),
    demand and goodput in weighted tokens/s, the KV simulation (histogram for charting), KV capacity per
    replica and whether the p99 KV per replica and the largest request fit in it, and `steps`."""

    input_tokens_per_s: float
    uncached_input_tokens_per_s: float
    output_tokens_per_s: float
    mean_residence_s: float
    mean_concurrency: float
    kv_tokens_p99: float
    kv_bytes_p99: float
    network_bytes_per_s: float
    capacity_units: float
    replicas: Replicas
    accelerators: int
    cost: PoolCost
    assumptions: tuple[str, ...]
    operating_point_used: OperatingPoint
    steps: tuple[Step, ...]
    kv: KvSimulation
    kv_capacity_tokens_per_replica: float
    kv_tokens_p99_per_replica: float
    kv_fits: bool
    ttft_s: float
    tpot_s: float
    prefill_concurrency: float
    decode_concurrency: float
    demand_wt_per_s: float
    goodput_wt_per_s_per_replica: float
    goodput_cu_per_replica: float
    accelerator: str
    failure_policy: str
    alternatives: tuple[Alternative, ...] = ()
    why_chosen: str = ""
    warnings: tuple[SizingWarning, ...] = ()
    # The CU to buy, checked by replay (docs/planning.md); its fields join the answer's top level.
    planning: PlanningAnswer | None = None
    # What the sized fleet would cost were it sized for the mean rate instead of the planning rate.
    peak_extra_cost_per_hour: float | None = None

    def to_dict(self) -> dict[str, object]:
        body = self._core_dict()
        if self.planning is not None:
            body.update(self.planning.to_dict())
        cost = self.cost.to_dict()
        extra = self.peak_extra_cost_per_hour
        cost["peak_extra_per_hour"] = None if extra is None else finite_or_none(extra)
        body["cost"] = cost
        return body

    def _core_dict(self) -> dict[str, object]:
        """docs/contract.md §3 output names, plus the extras a page needs; JSON-ready (no infinities)."""
        op = self.operating_point_used
        return {
            "input_tokens_per_s": self.input_tokens_per_s,
            "uncached_input_tokens_per_s": self.uncached_input_tokens_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "mean_residence_s": self.mean_residence_s,
            "mean_concurrency": self.mean_concurrency,
            "kv_tokens_p99": self.kv_tokens_p99,
            "kv_bytes_p99": self.kv_bytes_p99,
            "network_bytes_per_s": self.network_bytes_per_s,
            "capacity_units": self.capacity_units,
            "replicas": self.replicas.to_dict(),
            "accelerators": self.accelerators,
            "cost": self.cost.to_dict(),
            "assumptions": list(self.assumptions),
            "operating_point_used": {
                "label": op.label,
                "accelerator": op.accelerator,
                "accelerators_per_replica": op.accelerators_per_replica,
                "out_tps_per_replica": op.out_tps_per_replica,
                "ref_mean_prompt": op.ref_mix.mean_prompt,
                "ref_mean_output": op.ref_mix.mean_output,
                "ttft_limit_s": op.ttft_limit_s,
                "tpot_limit_s": op.tpot_limit_s,
                "measured_ttft_p99_s": op.measured_ttft_p99_s,
                "measured_tpot_p99_s": op.measured_tpot_p99_s,
                "is_ceiling": op.is_ceiling,
                "instances_per_replica": op.instances_per_replica,
                "source": op.source,
            },
            "steps": [s.to_dict() for s in self.steps],
            "kv_simulation": self.kv.to_dict(),
            "kv_capacity_tokens_per_replica": self.kv_capacity_tokens_per_replica,
            "kv_tokens_p99_per_replica": finite_or_none(self.kv_tokens_p99_per_replica),
            "kv_fits": self.kv_fits,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "prefill_concurrency": self.prefill_concurrency,
            "decode_concurrency": self.decode_concurrency,
            "demand_wt_per_s": self.demand_wt_per_s,
            "goodput_wt_per_s_per_replica": self.goodput_wt_per_s_per_replica,
            "goodput_cu_per_replica": self.goodput_cu_per_replica,
            "accelerator": self.accelerator,
            "failure_policy": self.failure_policy,
            "alternatives": [a.to_dict() for a in self.alternatives],
            "why_chosen": self.why_chosen,
            "warnings": [w.to_dict() for w in self.warnings],
        }
