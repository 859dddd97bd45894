"""What sizing one request class takes (docs/contract.md §3 inputs), and its validation."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from capacity.cost import AcceleratorCost, CostInputs, PurchasedAccelerator
from capacity.failure import FailurePolicy, parse_failure_policy
from capacity.input_errors import SizingInputError
from capacity.lengths import LengthSamples, LengthSpec, validate_length
from capacity.minute_cv import catalogue_cv
from capacity.operating_points import OperatingPoint, Slo, validate_slo
from capacity.ranges import in_range
from capacity.units import TokenWeights


@dataclass(frozen=True)
class ModelSpec:
    """A model's weights and memory footprint. `weights_gb` is per replica (one copy of the weights,
    sharded over the replica's accelerators); `kv_bytes_per_token` covers all layers and heads."""

    slug: str
    kv_bytes_per_token: float
    context_length: int
    weights_gb: float
    r_wt_per_s: float
    w_out: float = 4.0
    w_cached: float = 0.0
    # For the prefill bound (FLOPs per token = 2 × active parameters); None = no bound known.
    active_params_b: float | None = None

    @property
    def weights(self) -> TokenWeights:
        return TokenWeights(w_out=self.w_out, w_cached=self.w_cached)


@dataclass(frozen=True)
class AcceleratorSpec:
    slug: str
    memory_gb: float
    cost: AcceleratorCost = field(default_factory=lambda: PurchasedAccelerator(price=0.0, depreciation_years=1.0))
    chips_per_slice: int = 1
    # Host, power and the like of this accelerator type; None = SizingInput.cost_inputs.
    cost_inputs: CostInputs | None = None
    # Dense (no sparsity) BF16 TFLOP/s of one accelerator as catalogued (a whole slice for a TPU).
    dense_tflops: float | None = None


@dataclass(frozen=True)
class NetworkModel:
    """Bytes on the wire: text is about `bytes_per_token` per token each way, plus a fixed
    per-request overhead (HTTP/TLS headers, JSON envelope) and, when streaming, a per-output-token
    event frame."""

    bytes_per_token: float = 4.0
    overhead_bytes_per_request: float = 1024.0
    stream_bytes_per_output_token: float = 0.0


@dataclass(frozen=True, eq=False)
class SizingInput:
    """One request class (docs/contract.md §3).

    `accelerators` are the catalogue entries the chosen operating point may run on; `accelerator`
    pins one slug. `arrival_times_s`, when given, replaces the Poisson arrivals of the KV simulation
    (it is time-scaled to `arrival_rate_rps`, keeping its burst shape). Prompt and output samples of
    equal length are paired by index.
    """

    model: ModelSpec
    operating_points: tuple[OperatingPoint, ...]
    accelerators: tuple[AcceleratorSpec, ...]
    arrival_rate_rps: float
    prompt_tokens: LengthSpec
    output_tokens: LengthSpec
    slo: Slo
    cache_hit_ratio: float = 0.0
    cancellation_ratio: float = 0.0
    utilization_target: float = 0.7
    failure_policy: str = "none"
    zones: int = 1
    lb_unevenness: float = 1.0
    startup_minutes: float = 0.0
    ramp_rps_per_minute: float = 0.0
    accelerator: str | None = None
    allow_ceiling: bool = False
    arrival_times_s: npt.NDArray[np.float64] | None = None
    cost_inputs: CostInputs = field(default_factory=CostInputs)
    network: NetworkModel = field(default_factory=NetworkModel)
    seed: int = 0
    sim_requests: int = 20_000
    # Model FLOP utilisation of prefill: the share of dense peak a replica sustains on prompts.
    prefill_mfu: float = 0.5
    # Accelerators of each type in the whole catalogue fleet: more than that is IMPLAUSIBLE.
    fleet_accelerators: dict[str, int] | None = None
    # The planning answer (docs/planning.md): the share of requests the bucket may throttle, and
    # the burstiness of an envelope's simulated arrivals (used only without arrival times).
    target_throttled_share: float = 0.001
    minute_rate_cv: float = catalogue_cv().minute_rate_cv  # sizing.parsing asks telemetry.minute_cv
    # An envelope is answered across this many independent draws, at this quantile of them (capacity.realisations).
    realisations: int = 64
    realisation_quantile: float = 0.95
    # True when `arrival_times_s` are replayed at their own timing (a trace's bursts are real, and
    # its mean rate is the real volume) while `arrival_rate_rps` is a planning basis such as
    # peak_1m; False scales the times to `arrival_rate_rps` as the mean.
    trace_own_timing: bool = False


def _finite(name: str, x: object, *, low: float = 0.0, high: float = math.inf, low_open: bool = False) -> float:
    if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
        raise SizingInputError(name, f"must be a finite number (got {x!r})")
    v = float(x)
    if (v <= low if low_open else v < low) or v > high:
        lo = "(" if low_open else "["
        hi = "]" if math.isfinite(high) else ")"
        raise SizingInputError(name, f"must be in {lo}{low:g}, {high:g}{hi} (got {v:g})")
    return v


def validate(inp: SizingInput) -> FailurePolicy:
    """Raise SizingInputError for the first bad field; return the parsed failure policy."""
    m = inp.model
    _finite("model.kv_bytes_per_token", m.kv_bytes_per_token, low_open=True)
    _finite("model.weights_gb", m.weights_gb)
    _finite("model.r_wt_per_s", m.r_wt_per_s, low_open=True)
    _finite("model.w_out", m.w_out)
    _finite("model.w_cached", m.w_cached)
    if not isinstance(m.context_length, int) or m.context_length < 1:
        raise SizingInputError("model.context_length", "must be a whole number ≥ 1")
    for name in (
        "arrival_rate_rps",
        "cache_hit_ratio",
        "cancellation_ratio",
        "utilization_target",
        "lb_unevenness",
        "startup_minutes",
        "ramp_rps_per_minute",
        "target_throttled_share",
        "minute_rate_cv",
        "realisation_quantile",
    ):
        in_range(name, getattr(inp, name))
    whole = isinstance(inp.realisations, int) or (isinstance(inp.realisations, float) and inp.realisations.is_integer())
    if isinstance(inp.realisations, bool) or not whole:
        raise SizingInputError("realisations", f"must be a whole number (got {inp.realisations!r})")
    in_range("realisations", inp.realisations)
    validate_length(inp.prompt_tokens, "prompt_tokens")
    validate_length(inp.output_tokens, "output_tokens")
    validate_slo(inp.slo)
    if not isinstance(inp.zones, int) or isinstance(inp.zones, bool):
        raise SizingInputError("zones", "must be a whole number")
    in_range("zones", inp.zones)
    try:
        policy = parse_failure_policy(inp.failure_policy)
    except ValueError as e:
        raise SizingInputError("failure_policy", str(e))
    if policy.kind == "replica":
        in_range("failure_policy", policy.n, "failure_policy.replica")
    if policy.kind == "zone" and inp.zones < 2:
        raise SizingInputError("zones", f"a zone failure policy needs at least 2 zones (got {inp.zones})")
    in_range("sim_requests", inp.sim_requests)
    in_range("prefill_mfu", inp.prefill_mfu)
    for i, acc in enumerate(inp.accelerators):
        _finite(f"accelerators[{i}].memory_gb", acc.memory_gb, low_open=True)
        if acc.chips_per_slice < 1:
            raise SizingInputError(f"accelerators[{i}].chips_per_slice", "must be ≥ 1")
        acc.cost.validate(f"accelerators[{i}].cost")
        if acc.cost_inputs is not None:
            acc.cost_inputs.validate(f"accelerators[{i}].cost_inputs")
    inp.cost_inputs.validate()
    for name in ("bytes_per_token", "overhead_bytes_per_request", "stream_bytes_per_output_token"):
        _finite(f"network.{name}", getattr(inp.network, name))
    _validate_times(inp)
    return policy


def _validate_times(inp: SizingInput) -> None:
    t = inp.arrival_times_s
    if t is None:
        return
    if t.ndim != 1 or len(t) < 2:
        raise SizingInputError("arrival_times_s", "needs at least two arrivals")
    if not np.all(np.isfinite(t)):
        raise SizingInputError("arrival_times_s", "must be finite numbers of seconds")
    if float(t.max() - t.min()) <= 0:
        raise SizingInputError("arrival_times_s", "all arrivals are at the same instant")
    for name, spec in (("prompt_tokens", inp.prompt_tokens), ("output_tokens", inp.output_tokens)):
        if isinstance(spec, LengthSamples) and len(spec.values) != len(t):
            raise SizingInputError(
                "arrival_times_s",
                f"{len(t)} arrival times but {len(spec.values)} {name} samples; a replayed trace needs one each",
            )
