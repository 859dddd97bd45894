"""What a model can hold and compute (issue 15.3): the prefill bound, and the warnings of a sizing.

Prefill is compute: a replica processes at most
    accelerators × dense FLOP/s × MFU ÷ (2 × active parameters)   prompt tokens/s
(2 FLOPs per parameter per token, attention ignored: an upper bound on speed, so a lower bound on
replicas). Where the weighted-token sizing leaves a replica more uncached prompt tokens than that,
replicas are sized on the bound and `PREFILL_BOUND` says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity.steps import ceil_whole, num

RESIDENCE_IMPLAUSIBLE_S = 3600.0


@dataclass(frozen=True)
class SizingWarning:
    code: str
    message: str
    share: float | None = None

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code, "message": self.message}
        if self.share is not None:
            body["share"] = self.share
        return body


@dataclass(frozen=True)
class PrefillBound:
    """`tokens_per_s` per replica; `replicas` the whole replicas the uncached prompt load needs at it."""

    tokens_per_s: float
    replicas: int
    formula: str


def prefill_bound(
    *,
    accelerators_per_replica: int,
    dense_tflops: float | None,
    active_params_b: float | None,
    mfu: float,
    uncached_prompt_tps: float,
    utilization: float,
    lb_unevenness: float,
) -> PrefillBound | None:
    """None when the catalogue lacks the accelerator's dense FLOP/s or the model's active parameters."""
    if not dense_tflops or not active_params_b:
        return None
    bound = accelerators_per_replica * dense_tflops * 1e12 * mfu / (2 * active_params_b * 1e9)
    replicas = ceil_whole(uncached_prompt_tps / (bound * utilization) * lb_unevenness)
    formula = (
        f"{num(bound)} prompt tokens/s per replica = {accelerators_per_replica} × {num(dense_tflops)} TFLOP/s dense × "
        f"MFU {num(mfu)} ÷ (2 × {num(active_params_b)}B active parameters); {replicas} replicas = "
        f"⌈{num(uncached_prompt_tps)} uncached prompt tokens/s ÷ ({num(bound)} × utilization {num(utilization)}) × "
        f"unevenness {num(lb_unevenness)}⌉"
    )
    return PrefillBound(bound, replicas, formula)


def context_warning(exceeded: int, requests: int, context_length: int, paired: bool) -> SizingWarning | None:
    if exceeded == 0 or requests == 0:
        return None
    share = exceeded / requests
    source = "of the trace's requests" if paired else "of the simulated requests (from the stated quantiles)"
    return SizingWarning(
        "CONTEXT_EXCEEDED",
        f"{share:.1%} {source} ({exceeded:,} of {requests:,}) need more than the model's context of "
        f"{context_length:,} tokens (prompt + output): they fail or are truncated; the KV figures cap them at it",
        share,
    )


def prefill_warning(bound: PrefillBound, for_load: int) -> SizingWarning | None:
    if bound.replicas <= for_load:
        return None
    return SizingWarning(
        "PREFILL_BOUND",
        f"prompt processing needs {bound.replicas} replicas, more than the {for_load} the weighted-token goodput "
        f"gives: sized on the prefill bound ({bound.formula})",
    )


def implausible_warnings(
    *, residence_s: float, accelerators: int, accelerator: str, fleet_accelerators: int | None
) -> list[SizingWarning]:
    out = []
    if residence_s > RESIDENCE_IMPLAUSIBLE_S:
        out.append(
            SizingWarning(
                "IMPLAUSIBLE",
                f"a request stays {num(residence_s)} s, over an hour: check the output lengths and TPOT",
            )
        )
    if fleet_accelerators is not None and accelerators > fleet_accelerators:
        out.append(
            SizingWarning(
                "IMPLAUSIBLE",
                f"{accelerators:,} {accelerator} accelerators is more than the whole catalogue fleet has "
                f"({fleet_accelerators:,})",
            )
        )
    return out
