"""The sizing request (docs/contract.md §3 JSON) → a `SizingInput`, and the result → the API's response body.

`prepare_sizing` is the one parser: the sizing API (sizing.api) and the calculator page
(portal.views.sizing, whose form portal.forms.SizingForm builds the same JSON) both call it, so the page and the API
can never disagree on what an input means. Errors are `SizingInputError` naming the field (a 400) or
`TraceNotFound` (a 404: a trace the caller may not see is the same as one that does not exist).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from django.conf import settings

from capacity.input_errors import SizingInputError
from capacity.lengths import LengthQuantiles, LengthSamples, LengthSpec
from capacity.minute_cv import catalogue
from capacity.operating_points import Slo
from capacity.ranges import in_range
from capacity.rate_basis import BASES, DEFAULT_TRACE_BASIS, MinuteRates, describe_basis, minute_rates
from capacity.sizing import SizingInput, SizingResult, size
from entitlements.models import Region
from entitlements.models.prices import TERM_MONTHS
from entitlements.sizing_specs import CatalogueInputs, CostOptions, catalogue_inputs
from sizing.latency_answer import latency_fields
from telemetry.minute_cv import EnvelopeCv, envelope_cv
from telemetry.models import Trace
from telemetry.selectors import trace_arrays, visible_trace

# The request's top-level numbers: the one list (the API's serializer and the calculator's form use it too).
NUMBERS = (
    "cache_hit_ratio",
    "cancellation_ratio",
    "utilization_target",
    "lb_unevenness",
    "startup_minutes",
    "ramp_rps_per_minute",
    "target_throttled_share",
    "minute_rate_cv",
    "realisations",
    "realisation_quantile",
)
OTHER_KEYS = ("model", "accelerator", "arrival_rate_rps", "prompt_tokens", "output_tokens", "slo", "failure_policy")
# `region`, `term` and `quote_months` say where and on which commitment the answer is priced and quoted (§10).
PRICE_KEYS = ("region", "term", "quote_months")
KEYS = frozenset(
    NUMBERS + OTHER_KEYS + PRICE_KEYS + ("zones", "cost", "allow_ceiling", "arrival_rate_basis", "workload_kind")
)
QUANTILES = ("mean", "p50", "p95", "p99")
COST_FIELDS = tuple(f.name for f in fields(CostOptions))  # the `cost` object's fields, in CostOptions' order
COST_KEYS = frozenset(COST_FIELDS)
MAX_SAMPLES = 1_000_000


@dataclass(frozen=True, eq=False)
class PreparedSizing:
    """`basis` is how the rate was chosen: one of rate_basis.BASES, or "explicit" (arrival_rate_rps);
    `minute_rates` is the trace's one-minute rate distribution when the lengths came from one."""

    inp: SizingInput
    catalogue: CatalogueInputs
    notes: tuple[str, ...]
    trace: Trace | None
    basis: str = "explicit"
    minute_rates: MinuteRates | None = None
    cv: EnvelopeCv | None = None  # the envelope's minute-rate CV and its source (telemetry.minute_cv)


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SizingInputError(field, f"must be a finite number (got {value!r})")
    return float(value)


def _samples(field: str, values: Any) -> LengthSamples:
    if not isinstance(values, list) or not values:
        raise SizingInputError(field, "expected a non-empty list of whole token counts")
    if len(values) > MAX_SAMPLES:
        raise SizingInputError(field, f"at most {MAX_SAMPLES:,} samples")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise SizingInputError(f"{field}[{i}]", f"must be a whole number of tokens ≥ 0 (got {v!r})")
    return LengthSamples.of(values)


def _lengths(name: str, value: Any, user: Any) -> tuple[LengthSpec, Trace | None]:
    """One of {"mean","p50","p95","p99"}, {"samples": [...]}, {"trace": id} or a bare trace id."""
    if isinstance(value, str):
        value = {"trace": value}
    if not isinstance(value, Mapping):
        raise SizingInputError(name, 'expected {"mean", "p50", "p95", "p99"}, {"samples": [...]} or {"trace": "<id>"}')
    if "trace" in value or "samples" in value:
        key = "trace" if "trace" in value else "samples"
        if len(value) != 1:
            raise SizingInputError(name, f'"{key}" cannot be combined with other keys')
        if key == "samples":
            return _samples(f"{name}.samples", value["samples"]), None
        trace = visible_trace(user, value["trace"], field=f"{name}.trace")
        arrays = trace_arrays(trace)
        return LengthSamples(arrays.prompt if name == "prompt_tokens" else arrays.output), trace
    for key in value:
        if key not in QUANTILES:
            raise SizingInputError(f"{name}.{key}", "unknown field: expected mean, p50, p95 and p99")
    for key in QUANTILES:
        if key not in value:
            raise SizingInputError(f"{name}.{key}", "required")
    q = {k: _number(f"{name}.{k}", value[k]) for k in QUANTILES}
    return LengthQuantiles(**q), None


def _slo(value: Any) -> Slo:
    if not isinstance(value, Mapping):
        raise SizingInputError("slo", 'required: {"ttft_p99_s": seconds, "tpot_p99_s": seconds}')
    for key in value:
        if key not in ("ttft_p99_s", "tpot_p99_s"):
            raise SizingInputError(f"slo.{key}", "unknown field: expected ttft_p99_s and tpot_p99_s")
    return Slo(
        ttft_p99_s=_number("slo.ttft_p99_s", value.get("ttft_p99_s")),
        tpot_p99_s=_number("slo.tpot_p99_s", value.get("tpot_p99_s")),
    )


def _cost(value: Any) -> CostOptions:
    if value is None:
        return CostOptions()
    if not isinstance(value, Mapping):
        raise SizingInputError("cost", f"expected an object with {', '.join(sorted(COST_KEYS))}")
    given: dict[str, Any] = {}
    for key, v in value.items():
        if key not in COST_KEYS:
            raise SizingInputError(f"cost.{key}", f"unknown field: expected {', '.join(sorted(COST_KEYS))}")
        given[key] = v if key == "pricing" else in_range(f"cost.{key}", v)
    return CostOptions(**given)


def _term(value: Any) -> str:
    """The commitment term the answer's `cost` is priced at (docs/contract.md §10); default on demand."""
    if value in (None, ""):
        return "on_demand"
    if not isinstance(value, str) or value not in TERM_MONTHS:
        raise SizingInputError("term", f"expected one of {', '.join(TERM_MONTHS)} (got {str(value)[:32]!r})")
    return value


def parse_region(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not Region.objects.filter(slug=value).exists():
        raise SizingInputError("region", f"unknown region '{str(value)[:64]}'")
    return value


def _check_keys(payload: Mapping[str, Any]) -> None:
    for key in payload:
        if key not in KEYS:
            raise SizingInputError(str(key), "unknown field")


def prepare_sizing(payload: Any, user: Any) -> PreparedSizing:
    """docs/contract.md §3 JSON → SizingInput. Raises SizingInputError (400) or TraceNotFound (404).

    When both lengths come from the same trace they stay paired and the trace's own arrival times
    drive the KV simulation; `arrival_rate_rps` may then be left out to use the trace's mean rate.
    """
    if not isinstance(payload, Mapping):
        raise SizingInputError("non_field_errors", "expected a JSON object")
    _check_keys(payload)
    prompt, prompt_trace = _lengths("prompt_tokens", payload.get("prompt_tokens"), user)
    output, output_trace = _lengths("output_tokens", payload.get("output_tokens"), user)
    paired = prompt_trace if prompt_trace is not None and prompt_trace == output_trace else None
    notes: list[str] = []
    rate, basis, rates = _planning_rate(payload, paired)
    if rates is not None and basis != "explicit":
        notes.append(describe_basis(basis, rates))
    if paired is not None:
        notes.append(
            f"trace '{paired.name}' ({paired.requests:,} requests): prompt and output lengths paired by request"
        )
    slo = _slo(payload.get("slo"))
    failure_policy = payload.get("failure_policy", "none")
    if not isinstance(failure_policy, str):
        raise SizingInputError("failure_policy", "expected replica:n, zone, fraction:f or none")
    allow_ceiling = payload.get("allow_ceiling", False)
    if not isinstance(allow_ceiling, bool):
        raise SizingInputError("allow_ceiling", "must be true or false")
    cat = catalogue_inputs(
        model=payload.get("model"),
        accelerator=payload.get("accelerator"),
        slo=slo,
        cost=_cost(payload.get("cost")),
        allow_ceiling=allow_ceiling,
        region=parse_region(payload.get("region")),
        term=_term(payload.get("term")),
    )
    notes.extend(cat.price_basis)
    extra = {k: payload[k] for k in NUMBERS if payload.get(k) is not None}
    extra.setdefault("target_throttled_share", settings.PLANNING_TARGET_THROTTLED_SHARE["reserved"])
    cv = _envelope_cv(payload, extra.get("minute_rate_cv"))
    extra["minute_rate_cv"] = cv.value
    inp = SizingInput(
        model=cat.model,
        operating_points=cat.points,
        accelerators=cat.accelerators,
        arrival_rate_rps=rate,
        prompt_tokens=prompt,
        output_tokens=output,
        slo=slo,
        failure_policy=failure_policy,
        zones=payload.get("zones", 1),
        accelerator=payload.get("accelerator") or None,
        allow_ceiling=allow_ceiling,
        arrival_times_s=trace_arrays(paired).arrival_s if paired is not None else None,
        # A trace sized on a basis of its own minute rates keeps its own timing (docs/planning.md).
        trace_own_timing=paired is not None and basis != "explicit",
        cost_inputs=cat.cost_inputs,
        fleet_accelerators=cat.fleet,
        prefill_mfu=settings.SIZING_PREFILL_MFU,
        **extra,
    )
    return PreparedSizing(inp, cat, tuple(notes), paired, basis, rates, cv)


def _envelope_cv(payload: Mapping[str, Any], stated: float | None) -> EnvelopeCv:
    """The stated CV, else the catalogue's for `workload_kind` (the calculator names no tenant)."""
    kind = payload.get("workload_kind")
    if kind is not None and (not isinstance(kind, str) or kind not in catalogue()):
        raise SizingInputError("workload_kind", f"expected one of {', '.join(sorted(catalogue()))}")
    return envelope_cv(stated=stated, kind=kind)


def _planning_rate(payload: Mapping[str, Any], paired: Trace | None) -> tuple[Any, str, MinuteRates | None]:
    """(rate, basis, the trace's minute rates): an explicit `arrival_rate_rps`, or a basis of the
    paired trace's one-minute rates (default `peak_1m`: size for the busy minute, not the mean)."""
    rate, basis = payload.get("arrival_rate_rps"), payload.get("arrival_rate_basis")
    rates = minute_rates(trace_arrays(paired).arrival_s) if paired is not None else None
    if basis is not None:
        if not isinstance(basis, str) or basis not in BASES:
            raise SizingInputError(
                "arrival_rate_basis", f"expected one of {', '.join(BASES)} (got {str(basis)[:32]!r})"
            )
        if rate is not None:
            raise SizingInputError("arrival_rate_basis", "give arrival_rate_rps or arrival_rate_basis, not both")
        if rates is None:
            raise SizingInputError("arrival_rate_basis", "needs both lengths from one trace (its arrival times)")
        return rates.rate(basis), basis, rates
    if rate is not None:
        return rate, "explicit", rates
    if rates is None:
        raise SizingInputError("arrival_rate_rps", "required (it may be left out only when both lengths use one trace)")
    return rates.rate(DEFAULT_TRACE_BASIS), DEFAULT_TRACE_BASIS, rates


def api_field(field: str) -> str:
    """Capacity names some fields after its own inputs; say them as the API's."""
    if field.startswith("cost_inputs."):
        return "cost." + field.removeprefix("cost_inputs.")
    if field.startswith("accelerators["):
        return "cost.pricing"
    if field == "operating_points":
        return "model"
    return field


def sizing_response(prepared: PreparedSizing, result: SizingResult) -> dict[str, Any]:
    """SizingResult.to_dict() plus which catalogue row was used (id, runtime, scenario, source link)."""
    body = result.to_dict()
    row = prepared.catalogue.row_for(result.operating_point_used)
    op = dict(body["operating_point_used"])  # type: ignore[call-overload]
    op.update(
        id=row.pk,
        url=f"/api/v1/catalogue/operating-points/{row.pk}",
        model=row.model.slug,
        runtime=row.runtime,
        scenario=row.scenario,
        ref_mix_source=row.ref_mix_source,
    )
    body["operating_point_used"] = op
    body["assumptions"] = [*prepared.notes, *body["assumptions"]]  # type: ignore[misc]
    body["arrival_rate_used_rps"] = prepared.inp.arrival_rate_rps
    body["arrival_rate_basis"] = prepared.basis
    if prepared.trace is not None:
        body["trace"] = {"id": str(prepared.trace.pk), "name": prepared.trace.name}
    row = prepared.catalogue.row_for(result.operating_point_used)
    body.update(latency_fields(prepared.inp, result, row.pk, prepared.minute_rates))  # docs/latency.md
    if prepared.cv is not None and prepared.inp.arrival_times_s is None:  # an envelope: its CV and source
        body.update(prepared.cv.to_dict())
        body["warnings"] = [*body["warnings"], *prepared.cv.warnings]  # type: ignore[misc]
    return body


def run_sizing(payload: Any, user: Any) -> tuple[PreparedSizing, SizingResult]:
    prepared = prepare_sizing(payload, user)
    return prepared, size(prepared.inp)
