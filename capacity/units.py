"""Weighted tokens and capacity units (docs/contract.md §1).

The conversion from a measured operating point to capacity units lives here and
nowhere else; `explain_goodput` renders the same arithmetic in words for people.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_W_OUT = 4.0
DEFAULT_W_CACHED = 0.0


@dataclass(frozen=True)
class TokenWeights:
    """How much one token of each kind costs relative to one uncached prompt token."""

    w_out: float = DEFAULT_W_OUT
    w_cached: float = DEFAULT_W_CACHED

    def __post_init__(self) -> None:
        if self.w_out < 0 or self.w_cached < 0:
            raise ValueError("token weights must be non-negative")


@dataclass(frozen=True)
class ReferenceMix:
    """Mean prompt and output tokens per request of the benchmark behind an operating point."""

    mean_prompt: float
    mean_output: float

    def __post_init__(self) -> None:
        if self.mean_prompt < 0:
            raise ValueError("mean_prompt must be non-negative")
        if self.mean_output <= 0:
            raise ValueError("mean_output must be positive")


def weighted_tokens(*, prompt: float, cached_prompt: float = 0.0, output: float, weights: TokenWeights) -> float:
    """`uncached_prompt + w_cached × cached_prompt + w_out × output`.

    `prompt` is the whole prompt; `cached_prompt` is the part served from the prefix cache.
    """
    if prompt < 0 or cached_prompt < 0 or output < 0:
        raise ValueError("token counts must be non-negative")
    if cached_prompt > prompt:
        raise ValueError("cached_prompt cannot exceed prompt")
    uncached = prompt - cached_prompt
    return uncached + weights.w_cached * cached_prompt + weights.w_out * output


def replica_goodput_wt_per_s(*, out_tps_at_slo: float, mix: ReferenceMix, w_out: float) -> float:
    """Weighted tokens/s one replica sustains at the SLO on its reference mix.

    Each output token brings `mean_prompt / mean_output` prompt tokens with it, so the
    weighted rate is `out_tps × (w_out + mean_prompt / mean_output)`.
    """
    if out_tps_at_slo < 0:
        raise ValueError("out_tps_at_slo must be non-negative")
    return out_tps_at_slo * (w_out + mix.mean_prompt / mix.mean_output)


def replica_goodput_cu(*, out_tps_at_slo: float, mix: ReferenceMix, w_out: float, r_wt_per_s: float) -> float:
    """docs/contract.md §1: `out_tps_at_slo × (w_out + mean_prompt_ref / mean_output_ref) / R`."""
    if r_wt_per_s <= 0:
        raise ValueError("R must be positive")
    return replica_goodput_wt_per_s(out_tps_at_slo=out_tps_at_slo, mix=mix, w_out=w_out) / r_wt_per_s


def explain_goodput(*, out_tps_at_slo: float, mix: ReferenceMix, w_out: float, r_wt_per_s: float) -> str:
    cu = replica_goodput_cu(out_tps_at_slo=out_tps_at_slo, mix=mix, w_out=w_out, r_wt_per_s=r_wt_per_s)
    return (
        f"{cu:,.2f} CU per replica = {out_tps_at_slo:,.0f} output tok/s × "
        f"({w_out:g} + {mix.mean_prompt:,.0f} / {mix.mean_output:,.0f} prompt per output token) "
        f"÷ R {r_wt_per_s:,.0f} wt/s"
    )


def cu_to_wt_per_s(cu: float, r_wt_per_s: float) -> float:
    return cu * r_wt_per_s


def wt_per_s_to_cu(wt_per_s: float, r_wt_per_s: float) -> float:
    if r_wt_per_s <= 0:
        raise ValueError("R must be positive")
    return wt_per_s / r_wt_per_s
