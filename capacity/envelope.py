"""One conversion from a launch request's envelope to lengths and CU (issue 15.4).

Intake, review, approval and sizing all see a request class through its envelope (p50, p95, max of
prompt and output tokens). Each length is a lognormal through the stated p50 and p95, capped at
the max (a request over the max is refused or cut there, so no length exceeds it):

    μ = ln p50,  σ = (ln p95 − ln p50) ÷ z₉₅
    mean = E[min(X, max)] = e^(μ + σ²/2) Φ((ln max − μ − σ²) ÷ σ) + max (1 − Φ((ln max − μ) ÷ σ))
    p99  = min(max, e^(μ + z₉₉ σ))

The means drive the rates (and so CU); the quantiles, through p99, drive the KV tail. Using the p50
as the mean (as intake once did) under-states a right-skewed class: a coding-like class by 30 %.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from capacity.lengths import Z95, Z99, LengthQuantiles
from capacity.units import TokenWeights, weighted_tokens, wt_per_s_to_cu

PROMPT_LENGTHS = ("prompt_p50", "prompt_p95", "max_prompt_tokens")
OUTPUT_LENGTHS = ("output_p50", "output_p95", "max_output_tokens")
# The envelope's six lengths in reading order (p50, p95, max: prompt, then output), the one list the
# intake form, the pool fit and the finding review name them from.
ENVELOPE_LENGTHS = (*PROMPT_LENGTHS, *OUTPUT_LENGTHS)
# (lower, higher): an envelope's lengths are ordered, p50 ≤ p95 ≤ max (capacity.ordering checks them).
ENVELOPE_ORDER: tuple[tuple[str, str], ...] = (*pairwise(PROMPT_LENGTHS), *pairwise(OUTPUT_LENGTHS))


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def envelope_lengths(p50: float, p95: float, maximum: float) -> LengthQuantiles:
    """The capped lognormal through (p50, p95) as the quantiles and mean sizing takes."""
    if not 0 < p50 <= p95:
        raise ValueError(f"need 0 < p50 ≤ p95 (got p50 {p50:g}, p95 {p95:g})")
    top = max(float(maximum), float(p95))
    mu = math.log(p50)
    sigma = (math.log(p95) - mu) / Z95
    if sigma == 0:
        return LengthQuantiles(mean=float(p50), p50=float(p50), p95=float(p95), p99=float(p95))
    if math.isinf(top):  # no cap: the plain lognormal mean (inf × 0 in the capped form would be NaN)
        mean = math.exp(mu + sigma * sigma / 2)
    else:
        ln_top = math.log(top)
        mean = math.exp(mu + sigma * sigma / 2) * _phi((ln_top - mu - sigma * sigma) / sigma) + top * (
            1 - _phi((ln_top - mu) / sigma)
        )
    p99 = min(top, math.exp(mu + Z99 * sigma))
    return LengthQuantiles(mean=mean, p50=float(p50), p95=float(p95), p99=max(p99, float(p95)))


@dataclass(frozen=True)
class EnvelopeShape:
    prompt: LengthQuantiles
    output: LengthQuantiles

    def wt_per_request(self, weights: TokenWeights) -> float:
        """Weighted tokens of the mean request, prompts uncached: a launch promise should not lean on
        a cache hit ratio nobody has measured yet."""
        return weighted_tokens(prompt=self.prompt.mean, output=self.output.mean, weights=weights)


def envelope_shape(
    *, prompt_p50: float, prompt_p95: float, max_prompt: float, output_p50: float, output_p95: float, max_output: float
) -> EnvelopeShape:
    return EnvelopeShape(
        prompt=envelope_lengths(prompt_p50, prompt_p95, max_prompt),
        output=envelope_lengths(output_p50, output_p95, max_output),
    )


def rps_to_cu(rps: float, shape: EnvelopeShape, weights: TokenWeights, r_wt_per_s: float) -> float:
    if rps < 0:
        raise ValueError("a request rate cannot be negative")
    return wt_per_s_to_cu(rps * shape.wt_per_request(weights), r_wt_per_s)
