"""Latency under load for a sizing answer: the chosen point's serving curve, where the sized fleet's SLO
breaks, what the simulation predicts at the planning rate, one replica more or less, and the fleet an
SLO margin needs beside the utilisation rule (docs/latency.md).

The curve of each (model, accelerator, replica shape, runtime) is fitted on the whole catalogue, so a
pair with one point can borrow from the same accelerator's other models.
"""

from __future__ import annotations

from typing import Any

from capacity.latency_curve import LatencyCurve, MeasuredPoint, fit_pairs
from capacity.latency_report import empty, latency_report
from capacity.rate_basis import MinuteRates
from capacity.sizing_inputs import SizingInput
from capacity.sizing_result import SizingResult
from entitlements.models import OperatingPoint
from entitlements.sizing_specs import point_label


def _pair_key(op: OperatingPoint) -> str:
    return f"{op.model.slug} on {op.accelerators_per_replica}× {op.accelerator.slug}, {op.runtime}"


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def catalogue_curves() -> tuple[dict[str, LatencyCurve], dict[int, str]]:
    """Every pair's curve, and each catalogue row's pair key."""
    pairs: dict[str, tuple[str, list[MeasuredPoint]]] = {}
    keys: dict[int, str] = {}
    for op in OperatingPoint.objects.select_related("model", "accelerator").order_by("pk"):
        key = _pair_key(op)
        keys[op.pk] = key
        point = MeasuredPoint(
            label=point_label(op),
            out_tps=float(op.out_tps_per_replica),
            ttft_p99_s=_s(op.measured_ttft_p99_ms),
            tpot_p99_s=_s(op.measured_tpot_p99_ms),
            is_ceiling=bool(op.is_ceiling),
            # The reference mix behind its p99s: a one-point pair borrows TTFT's elasticity by it.
            prompt_per_output=op.ref_mean_prompt / op.ref_mean_output,
        )
        pairs.setdefault(key, (op.accelerator.slug, []))[1].append(point)
    frozen = {k: (acc, tuple(pts)) for k, (acc, pts) in pairs.items()}
    return fit_pairs(frozen), keys  # type: ignore[arg-type]  # tuples are sequences


def latency_fields(
    inp: SizingInput, result: SizingResult, row_pk: int, minute_rates: MinuteRates | None = None
) -> dict[str, Any]:
    """The four docs/contract.md §3 latency fields plus `latency_under_load` for a sizing of catalogue row
    `row_pk` (the calculator's chosen point, or a pool's own point for issue 22's intake). Takes the
    sizing's parts, not sizing.parsing's PreparedSizing, so parsing imports this and not the reverse."""
    op = result.operating_point_used
    lam, n = inp.arrival_rate_rps, result.replicas.steady
    if lam <= 0 or n < 1:
        return empty("no arrivals: there is no load to predict latency at")
    curves, keys = catalogue_curves()
    curve = curves.get(keys.get(row_pk, ""))
    if curve is None:
        return empty(f"{op.label}: no measured TTFT and TPOT p99 on this pair, so no curve can be fitted")
    return latency_report(inp, result, curve, minute_rates)
