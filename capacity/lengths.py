"""Prompt and output length distributions: stated quantiles or explicit samples, and how to sample them.

Quantiles become a quantile function Q(u) that passes exactly through the stated p50, p95 and p99
and is non-decreasing in each of them for every u. The simulation draws the same u (common random
numbers) for every input, so raising any stated quantile can never lower a simulated length — the
sizing rule "longer requests never lower a figure" then holds draw by draw, not only on average.
A single lognormal fitted to p50 and p95/p99 would not have that property (raising p99 widens
it and shortens its lower half), which is why this is piecewise:

- below the median: linear from 0 to p50 in u (close to a lognormal with σ ≈ 1, whose lower half
  averages 0.52 × p50 against 0.5 × p50 here);
- p50 → p95 and p95 → p99: lognormal segments (log-linear in the normal score z);
- above p99: held at p99. Nothing beyond the stated quantiles is invented.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from capacity.input_errors import SizingInputError
from capacity.ordering import ordering_errors
from capacity.ranges import in_range

FloatArray = npt.NDArray[np.float64]

# Acklam's rational approximation of the standard normal quantile (relative error < 1.2e-9);
# numpy has no ndtri and scipy is not worth a dependency for one function.
_A = (
    -3.969683028665376e01,
    2.209460984245205e02,
    -2.759285104469687e02,
    1.383577518672690e02,
    -3.066479806614716e01,
    2.506628277459239e00,
)
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01, -1.328068155288572e01)
_C = (
    -7.784894002430293e-03,
    -3.223964580411365e-01,
    -2.400758277161838e00,
    -2.549732539343734e00,
    4.374664141464968e00,
    2.938163982698783e00,
)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
_P_LOW = 0.02425


def normal_ppf(u: FloatArray) -> FloatArray:
    """Standard normal quantile for u in (0, 1), vectorised."""
    u = np.asarray(u, dtype=np.float64)
    z = np.empty_like(u)
    lo = u < _P_LOW
    hi = u > 1 - _P_LOW
    mid = ~(lo | hi)
    q = u[mid] - 0.5
    r = q * q
    num = ((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]
    den = ((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1
    z[mid] = num * q / den
    for mask, sign, tail in ((lo, 1.0, u[lo]), (hi, -1.0, 1 - u[hi])):
        t = np.sqrt(-2 * np.log(tail))
        num = ((((_C[0] * t + _C[1]) * t + _C[2]) * t + _C[3]) * t + _C[4]) * t + _C[5]
        den = (((_D[0] * t + _D[1]) * t + _D[2]) * t + _D[3]) * t + 1
        z[mask] = sign * num / den
    return z


Z95 = float(normal_ppf(np.array([0.95]))[0])
Z99 = float(normal_ppf(np.array([0.99]))[0])


@dataclass(frozen=True)
class LengthQuantiles:
    """Tokens per request as stated quantiles. `mean` feeds the rates; the quantiles feed the KV tail."""

    mean: float
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True, eq=False)
class LengthSamples:
    """Tokens per request as observed values (e.g. a trace column). Index i of prompt and output
    samples of equal length belong to the same request."""

    values: npt.NDArray[np.int64]

    @classmethod
    def of(cls, values: object) -> LengthSamples:
        return cls(np.asarray(values, dtype=np.int64))


LengthSpec = LengthQuantiles | LengthSamples


def validate_length(spec: LengthSpec, name: str) -> None:
    """Raise SizingInputError naming `name.<field>` for the first thing wrong with `spec`."""
    if isinstance(spec, LengthSamples):
        v = spec.values
        if v.ndim != 1 or v.size == 0:
            raise SizingInputError(f"{name}.samples", "needs at least one sample")
        for bad in (int(v.min()), int(v.max())):
            in_range(f"{name}.samples", bad, "token_samples")
        if int(v.max()) == 0:
            raise SizingInputError(f"{name}.samples", "all samples are 0")
        return
    for field in ("mean", "p50", "p95", "p99"):
        in_range(f"{name}.{field}", getattr(spec, field), "tokens")
    quantiles = {"p50": spec.p50, "p95": spec.p95, "p99": spec.p99}
    errors = ordering_errors(quantiles, (("p50", "p95"), ("p95", "p99")))
    if errors:
        field, message = next(iter(errors.items()))
        raise SizingInputError(f"{name}.{field}", message)


def spec_mean(spec: LengthSpec) -> float:
    if isinstance(spec, LengthSamples):
        return float(spec.values.mean())
    return float(spec.mean)


def quantile_lengths(spec: LengthQuantiles, u: FloatArray) -> FloatArray:
    """Q(u) for the piecewise distribution described in the module docstring.

    Segments are computed as exp((1 − w)·ln a + w·ln b): each term moves with one quantile only,
    so even after rounding a larger quantile never yields a smaller length.
    """
    u = np.asarray(u, dtype=np.float64)
    out = np.full_like(u, float(spec.p99))
    low = u < 0.5
    out[low] = spec.p50 * (u[low] / 0.5)
    ln50, ln95, ln99 = math.log(spec.p50), math.log(spec.p95), math.log(spec.p99)
    mid = (u >= 0.5) & (u < 0.95)
    w = np.clip(normal_ppf(u[mid]) / Z95, 0.0, 1.0)
    out[mid] = np.exp((1 - w) * ln50 + w * ln95)
    upper = (u >= 0.95) & (u < 0.99)
    w = np.clip((normal_ppf(u[upper]) - Z95) / (Z99 - Z95), 0.0, 1.0)
    out[upper] = np.exp((1 - w) * ln95 + w * ln99)
    return out


def stratified_uniform(rng: np.random.Generator, n: int) -> FloatArray:
    """One draw in each of n equal slices of (0, 1), shuffled: sample means settle far faster
    than with plain uniforms, which keeps the simulation's mean close to the stated mix."""
    u: FloatArray = (rng.permutation(n) + rng.random(n)) / n
    return u


def cycled_indices(rng: np.random.Generator, n_samples: int, n: int) -> npt.NDArray[np.intp]:
    """n indices into n_samples values, using every value once per cycle (sampling without
    replacement, reshuffled each cycle) so the drawn mean tracks the sample mean."""
    cycles = -(-n // n_samples)
    idx = np.argsort(rng.random((cycles, n_samples)), axis=1).ravel()
    return idx[:n]


def draw_lengths(spec: LengthSpec, u: FloatArray, idx: npt.NDArray[np.intp]) -> FloatArray:
    """Lengths for one simulated request each: from Q(u) for quantiles, or samples[idx]."""
    if isinstance(spec, LengthSamples):
        drawn: FloatArray = spec.values[idx].astype(np.float64)
        return drawn
    # Whole tokens keep every KV sum exact in float64, so equal inputs give bit-equal outputs.
    # (The tiny shrink keeps exp(ln 100) = 100.00000000000001 from becoming 101.)
    whole: FloatArray = np.ceil(quantile_lengths(spec, u) * (1 - 1e-12))
    return whole
