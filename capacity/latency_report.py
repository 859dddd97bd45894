"""Latency under load for one sizing on one serving curve: where the sized fleet's SLO breaks, what
the simulation predicts at the planning rate, one replica more or less, the fleet an SLO margin needs
beside the utilisation rule, and the chart's series (docs/latency.md). Pure: the caller finds the curve.
"""

from __future__ import annotations

import math
from typing import Any

from capacity.latency_curve import LatencyCurve
from capacity.latency_fleet import Fleet, Workload, simulate_fleet, workload
from capacity.operating_points import Slo
from capacity.rate_basis import MinuteRates
from capacity.sizing_inputs import SizingInput
from capacity.sizing_result import SizingResult

SLO_MARGIN = 1.2  # the SLO-based fleet holds the SLO at this multiple of the planning rate
CHART_POINTS = 41
SIM_FACTORS = (0.5, 0.8, 1.0, 1.2)  # of the planning rate: where the simulation marks p50 / p99


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


def latency_report(
    inp: SizingInput, result: SizingResult, curve: LatencyCurve, minute_rates: MinuteRates | None = None
) -> dict[str, Any]:
    """The four docs/contract.md §3 latency fields plus `latency_under_load` (what the page charts and advises)."""
    op = result.operating_point_used
    lam, n = inp.arrival_rate_rps, result.replicas.steady
    if lam <= 0 or n < 1:
        return empty("no arrivals: there is no load to predict latency at")
    fleet = Fleet(
        curve=curve,
        wt_per_request=result.demand_wt_per_s / lam,
        wt_per_out_ref=result.goodput_wt_per_s_per_replica / op.out_tps_per_replica,
        lb_unevenness=inp.lb_unevenness,
    )
    work = _workload(inp, minute_rates, n)
    kv, w_out, slo = result.kv_capacity_tokens_per_replica, inp.model.w_out, inp.slo

    def sim(factor: float, replicas: int) -> dict[str, Any]:
        r = simulate_fleet(fleet, work.at_rate(factor), replicas, slo, kv, w_out)
        return {
            "rate_rps": lam * factor,
            "replicas": replicas,
            **r.latency(),
            "slo_attainment": r.attainment,
            "note": r.note,
        }

    at_plan = sim(1.0, n)
    breaking = fleet.breaking_rate(slo, n)
    neighbours = [{**sim(1.0, m), "breaking_rate_rps": fleet.breaking_rate(slo, m)} for m in (n - 1, n + 1) if m >= 1]
    return {
        "latency_curve": curve.to_dict(),
        "latency_at_planning_rate": {k: at_plan[k] for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")},
        "slo_attainment": at_plan["slo_attainment"],
        "slo_breaking_rate_rps": breaking,
        "latency_under_load": {
            "replicas": n,
            "slo": {"ttft_p99_s": slo.ttft_p99_s, "tpot_p99_s": slo.tpot_p99_s},
            "planning_rate_rps": lam,
            "breaking_over_planning": breaking / lam,
            "p99_at_planning_rate": dict(zip(("ttft_s", "tpot_s"), map(_finite, fleet.p99(lam, n)), strict=True)),
            "simulation": at_plan["note"],
            "workload": work.source,
            "neighbours": neighbours,
            "slo_fleet": _slo_fleet(fleet, result, lam, slo),
            "series": _series(fleet, n, lam, breaking, sim, at_plan),
            "load_per_replica": fleet.load(lam, n),
        },
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


def _slo_fleet(fleet: Fleet, result: SizingResult, lam: float, slo: Slo) -> dict[str, Any]:
    """The fleet that holds the SLO at SLO_MARGIN × the planning rate (never under the KV need), beside
    the utilisation rule's steady fleet, both at the fully loaded price of one replica-hour."""
    slo_n = fleet.replicas_for(slo, lam, SLO_MARGIN)
    per_replica = result.cost.per_hour.value / result.replicas.total if result.replicas.total else 0.0
    rule_n = result.replicas.steady
    out: dict[str, Any] = {
        "margin": SLO_MARGIN,
        "rule_replicas": rule_n,
        "rule_cost_per_hour": rule_n * per_replica,
        "cost_per_replica_hour": per_replica,
        "currency": result.cost.per_hour.currency,
    }
    if slo_n is None:
        return {**out, "replicas": None, "why": "the SLO is below the curve's floor: no number of replicas meets it"}
    n = max(slo_n, result.replicas.for_kv)
    return {
        **out,
        "replicas": n,
        "cost_per_hour": n * per_replica,
        "breaking_rate_rps": fleet.breaking_rate(slo, n),
        "for_kv": result.replicas.for_kv,
    }


def _series(fleet: Fleet, n: int, lam: float, breaking: float, sim: Any, at_plan: dict[str, Any]) -> dict[str, Any]:
    top = max(1.3 * breaking, 1.5 * lam)
    rates = [top * i / (CHART_POINTS - 1) for i in range(CHART_POINTS)]
    p99 = [fleet.p99(r, n) for r in rates]
    marks = [at_plan if f == 1.0 else sim(f, n) for f in SIM_FACTORS]  # the planning rate is simulated already
    return {
        "rate_rps": rates,
        "ttft_p99_s": [_finite(t) for t, _ in p99],
        "tpot_p99_s": [_finite(t) for _, t in p99],
        "sim": [{k: m[k] for k in ("rate_rps", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")} for m in marks],
    }
