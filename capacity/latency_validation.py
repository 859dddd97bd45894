"""Leave-one-out over the catalogue's pairs: how well the serving curve predicts a point it never saw.

For every pair (model, accelerator, accelerators per replica, runtime) with two or more usable points,
each point is held out in turn, the curve is fitted on the rest (borrowing from the other pairs as
capacity.latency_curve does), and the held-out point is predicted: a latency point's TPOT p99 at its
measured throughput, an Offline point's saturation throughput. Errors are |predicted − measured| ÷
measured. The table and its median live in docs/latency.md; a test keeps the median from growing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from capacity.latency_curve import CurveError, LatencyCurve, MeasuredPoint, Shape, donors_for, fit, fit_pairs

Pairs = dict[str, tuple[str, Sequence[MeasuredPoint]]]
TTFT, TPOT, SATURATION = "TTFT p99 s", "TPOT p99 s", "saturation tokens/s"


def _ms(text: str) -> float | None:
    return float(text) / 1000.0 if text.strip() else None


def pairs_from_rows(
    rows: Iterable[Mapping[str, str]], mix_of: Callable[[Mapping[str, str]], float | None] | None = None
) -> Pairs:
    """Rows of data/operating_points.csv → pairs. A row without a latency bound is a ceiling; a row with
    a bound needs both measured p99s to count (vendor rows that report only means are left out).
    `mix_of(row)`: the row's reference mix as prompt ÷ output tokens (the CSV does not state it; the
    catalogue loader knows it), which a one-point pair's TTFT elasticity is borrowed by."""
    out: dict[str, tuple[str, list[MeasuredPoint]]] = {}
    for row in rows:
        key = (
            f"{row['model']} on {row['accelerators_per_replica']}× {row['accelerator']} ({row['runtime_or_submitter']})"
        )
        if not row["throughput_tokens_per_s"].strip():
            continue
        ceiling = row["latency_constraint"].strip().lower().startswith("none")
        point = MeasuredPoint(
            label=row["scenario"],
            out_tps=float(row["throughput_tokens_per_s"]),
            ttft_p99_s=_ms(row["measured_ttft_p99_ms"]),
            tpot_p99_s=_ms(row["measured_tpot_p99_ms"]),
            is_ceiling=ceiling,
            prompt_per_output=mix_of(row) if mix_of else None,
        )
        if ceiling or point.has_latency:
            out.setdefault(key, (row["accelerator"], []))[1].append(point)
    return {k: (acc, tuple(pts)) for k, (acc, pts) in out.items()}


@dataclass(frozen=True)
class HeldOut:
    pair: str
    point: str
    quantity: str
    measured: float
    predicted: float
    borrowed: bool

    @property
    def error(self) -> float:
        return abs(self.predicted - self.measured) / self.measured


def leave_one_out(pairs: Pairs) -> list[HeldOut]:
    curves = fit_pairs(pairs)
    out: list[HeldOut] = []
    for key, (acc, pts) in pairs.items():
        if len(pts) < 2:
            continue
        # Donors are the other pairs' curves: nothing of the held-out point's pair reaches its prediction.
        others = {k: (pairs[k][0], c.shape(k)) for k, c in curves.items() if k != key and not c.is_borrowed}
        donors: list[Shape] = donors_for(acc, others)
        every = [s for _, s in others.values()]
        for i, held in enumerate(pts):
            rest = [p for j, p in enumerate(pts) if j != i]
            try:
                curve = fit(rest, donors, every)
            except CurveError:
                continue
            out.extend(_predict(key, held, curve))
    return out


def _predict(key: str, held: MeasuredPoint, curve: LatencyCurve) -> list[HeldOut]:
    if held.is_ceiling:
        return [HeldOut(key, held.label, SATURATION, held.out_tps, curve.x_sat, curve.is_borrowed)]
    x, b = held.out_tps, curve.is_borrowed
    return [
        HeldOut(key, held.label, TTFT, float(held.ttft_p99_s or 0), curve.ttft_p99(x), b),
        HeldOut(key, held.label, TPOT, float(held.tpot_p99_s or 0), curve.tpot_p99(x), b),
    ]


def median_error(rows: Sequence[HeldOut]) -> float:
    return float(statistics.median(r.error for r in rows))


def summary(rows: Sequence[HeldOut]) -> dict[str, tuple[int, float, float]]:
    """Per quantity: (points, median error, worst error)."""
    out = {}
    for q in (TTFT, TPOT, SATURATION):
        errs = [r.error for r in rows if r.quantity == q]
        if errs:
            out[q] = (len(errs), float(statistics.median(errs)), max(errs))
    return out


def markdown_table(rows: Sequence[HeldOut]) -> str:
    lines = [
        "| pair | held out | quantity | measured | predicted | error |",
        "|---|---|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.pair} | {r.point} | {r.quantity} | {r.measured:,.4g} | {r.predicted:,.4g} | {r.error:.1%} |"
        )
    return "\n".join(lines)
