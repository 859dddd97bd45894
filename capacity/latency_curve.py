"""The serving curve of one (model, accelerator, replica shape): TTFT and TPOT p99 against load.

The model (named `step-queue`, its reading in docs/latency.md):

- **Decode step time grows with the tokens in the batch.** One iteration of a continuous-batching
  server takes `s(B) = a + B / x_inf`: a floor `a` (reading the weights once per step) plus a cost per
  sequence in the batch. Prefill shares the step, so `1 / x_inf` is the work per output token of the
  point's reference mix *including its prompt's share*. A replica carrying `x` output tokens/s needs
  the batch `B = x · s(B)`, hence **TPOT p99(x) = a / (1 − x / x_inf)**.
- **Queueing as throughput approaches saturation.** The Offline point is the most a replica can carry
  (`x_sat`, its KV-bound batch). A request waits for a slot like in a single queue loaded to
  `ρ = x / x_sat`: **TTFT p99(x) = p + w · ρ / (1 − ρ)**, `p` the prefill (and fixed) floor.
  Both are infinite at and past `x_sat`.

Fit (least squares, exact with two points): `1 / TPOT` is linear in `x` (intercept `1/a`, slope
`−1/(a · x_inf)`) and TTFT is linear in `ρ/(1−ρ)`. With one latency point the pair cannot fix two
parameters per curve, so it borrows the dimensionless `u = x_sat / x_inf` as the median of the same
accelerator's other models with two latency points (else of every accelerator's), scaled through its
own point, and TTFT's elasticity to the step `β` (TTFT ∝ TPOT^β through its point) from the pairs
whose reference mix (prompt ÷ output tokens) is nearest its own; a pair with no Offline point borrows
`x_sat / x` at its point the same way. `borrowed` says what was borrowed and from whom.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MODEL_NAME = "step-queue"
# x_inf is kept at least this far above x_sat so TPOT stays finite below saturation (a fit through
# two points very close to x_sat can put the step-slope asymptote under it).
MIN_INF_OVER_SAT = 1.02
# Where a fit gives no TTFT floor or no queue term, this share of the point's TTFT is the floor.
_FLOOR_SHARE = 0.5


@dataclass(frozen=True)
class MeasuredPoint:
    """One catalogue point of a pair: output tokens/s per replica, p99s in seconds (None: not measured)."""

    label: str
    out_tps: float
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    is_ceiling: bool = False
    # The point's reference mix, prompt tokens per output token (None: not known): how prompt-heavy the
    # requests behind its p99s were, which decides whose TTFT elasticity a one-point pair borrows.
    prompt_per_output: float | None = None

    @property
    def has_latency(self) -> bool:
        return not self.is_ceiling and self.ttft_p99_s is not None and self.tpot_p99_s is not None


@dataclass(frozen=True)
class Shape:
    """The dimensionless shape one pair lends: `u = x_sat/x_inf`, `q = w/p`, `sat_over_point` = x_sat ÷
    the throughput of its highest-load latency point, `beta` = d ln TTFT ÷ d ln TPOT between its lowest-
    and highest-load latency points (None: fewer than two), `mix` its reference prompt ÷ output tokens."""

    key: str
    u: float
    q: float
    sat_over_point: float | None
    beta: float | None = None
    mix: float | None = None


@dataclass(frozen=True)
class LatencyCurve:
    """Fitted parameters (seconds, output tokens/s per replica of the reference mix) and their sources."""

    a_s: float
    x_inf: float
    x_sat: float
    p_s: float
    w_s: float
    points: tuple[MeasuredPoint, ...]
    borrowed: tuple[str, ...] = ()
    # Set on a one-latency-point pair: TTFT p99 = ttft_per_tpot × anchor × (TPOT p99 ÷ anchor)^ttft_beta,
    # through its point (anchor = the point's TPOT p99), not p + w·ρ/(1−ρ). β = 1 keeps the point's ratio.
    ttft_per_tpot: float | None = None
    ttft_beta: float = 1.0
    ttft_anchor_tpot_s: float | None = None

    def tpot_p99(self, x: float) -> float:
        if x >= self.x_sat:
            return math.inf
        return self.a_s / (1.0 - max(x, 0.0) / self.x_inf)

    def ttft_p99(self, x: float) -> float:
        if x >= self.x_sat:
            return math.inf
        if self.ttft_per_tpot is not None:
            return self._ttft_on_tpot(self.tpot_p99(x))
        rho = max(x, 0.0) / self.x_sat
        return self.p_s + self.w_s * rho / (1.0 - rho)

    def _ttft_on_tpot(self, tpot: float) -> float:
        anchor = self.ttft_anchor_tpot_s or tpot
        per = self.ttft_per_tpot or 0.0  # set whenever this law is used (ttft_p99 checks)
        return float(per * anchor * (tpot / anchor) ** self.ttft_beta)

    def _tpot_at_ttft(self, ttft: float) -> float:
        """The TPOT p99 at which a one-point pair's TTFT p99 reaches `ttft` (inf: never; β ≥ 0)."""
        anchor = self.ttft_anchor_tpot_s or 1.0
        at_anchor = self.ttft_per_tpot * anchor  # type: ignore[operator]
        if ttft <= 0:
            return 0.0
        if self.ttft_beta == 0:
            return math.inf if ttft >= at_anchor else 0.0
        # In logs: a β near 0 sends the power past a float's range (inf or 0, which is its limit).
        exponent = math.log(anchor) + math.log(ttft / at_anchor) / self.ttft_beta
        return math.exp(exponent) if abs(exponent) < 700 else (math.inf if exponent > 0 else 0.0)

    def max_load(self, ttft_slo_s: float, tpot_slo_s: float) -> float:
        """The per-replica throughput at which the first p99 reaches its limit (0 if the floor is over it)."""
        by_tpot = self.x_inf * (1.0 - self.a_s / tpot_slo_s) if tpot_slo_s > self.a_s else 0.0
        if self.ttft_per_tpot is not None:
            limit = self._tpot_at_ttft(ttft_slo_s)
            by_ttft = self.x_inf * (1.0 - self.a_s / limit) if limit > self.a_s else 0.0
        elif ttft_slo_s <= self.p_s:
            by_ttft = 0.0
        elif self.w_s == 0:
            by_ttft = self.x_sat
        else:
            r = (ttft_slo_s - self.p_s) / self.w_s
            by_ttft = self.x_sat * r / (1.0 + r)
        return max(0.0, min(by_tpot, by_ttft, self.x_sat))

    @property
    def is_borrowed(self) -> bool:
        return bool(self.borrowed)

    def shape(self, key: str) -> Shape:
        lat = sorted((p for p in self.points if p.has_latency), key=lambda p: p.out_tps)
        top = lat[-1] if lat else None
        return Shape(
            key,
            self.x_sat / self.x_inf,
            self.w_s / self.p_s if self.p_s > 0 else 0.0,
            self.x_sat / top.out_tps if top else None,
            _elasticity(lat[0], lat[-1]) if len(lat) >= 2 else None,
            _mix(self.points),
        )

    def parameters(self) -> dict[str, float]:
        return {"a_s": self.a_s, "x_inf": self.x_inf, "x_sat": self.x_sat, "p_s": self.p_s, "w_s": self.w_s}

    def to_dict(self) -> dict[str, object]:
        return {
            "model": MODEL_NAME,
            "parameters": self.parameters(),
            "points": [
                {
                    "label": p.label,
                    "out_tps_per_replica": p.out_tps,
                    "ttft_p99_s": p.ttft_p99_s,
                    "tpot_p99_s": p.tpot_p99_s,
                    "is_ceiling": p.is_ceiling,
                }
                for p in self.points
            ],
            "borrowed": list(self.borrowed),
            "formula": describe(self),
        }


def _elasticity(lo: MeasuredPoint, hi: MeasuredPoint) -> float | None:
    """d ln TTFT ÷ d ln TPOT between two latency points (None where TPOT does not move)."""
    t0, t1, s0, s1 = lo.ttft_p99_s, hi.ttft_p99_s, lo.tpot_p99_s, hi.tpot_p99_s
    if not (t0 and t1 and s0 and s1) or s0 == s1:
        return None
    return math.log(t1 / t0) / math.log(s1 / s0)


def _mix(points: Sequence[MeasuredPoint]) -> float | None:
    mixes = [p.prompt_per_output for p in points if p.prompt_per_output]
    return _median(mixes) if mixes else None


def describe(c: LatencyCurve) -> str:
    if c.ttft_per_tpot is not None:
        anchor = c.ttft_anchor_tpot_s or c.a_s
        return (
            f"TPOT p99(x) = {c.a_s * 1000:.1f} ms ÷ (1 − x ÷ {c.x_inf:,.0f}); TTFT p99(x) = "
            f"{c.ttft_per_tpot * anchor * 1000:.0f} ms × (TPOT p99(x) ÷ {anchor * 1000:.1f} ms)^{c.ttft_beta:.2f}, "
            f"up to x_sat = {c.x_sat:,.0f} (x = output tokens/s per replica)"
        )
    return (
        f"TPOT p99(x) = {c.a_s * 1000:.1f} ms ÷ (1 − x ÷ {c.x_inf:,.0f}); "
        f"TTFT p99(x) = {c.p_s * 1000:.0f} ms + {c.w_s * 1000:.1f} ms × ρ ÷ (1 − ρ), ρ = x ÷ {c.x_sat:,.0f} "
        f"(x = output tokens/s per replica)"
    )


class CurveError(ValueError):
    """The points cannot make a curve (no latency point and nothing to borrow)."""


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """(intercept, slope) of least squares; a single x gives slope 0."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return my, 0.0
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    return my - slope * mx, slope


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def fit(
    points: Sequence[MeasuredPoint], donors: Sequence[Shape] = (), beta_donors: Sequence[Shape] | None = None
) -> LatencyCurve:
    """Fit one pair's points; borrow from `donors` (shapes of other pairs) what one point cannot fix, and
    TTFT's elasticity from `beta_donors` (every accelerator's pairs: it follows the mix, not the chip;
    default `donors`)."""
    lat = sorted((p for p in points if p.has_latency), key=lambda p: p.out_tps)
    ceilings = [p for p in points if p.is_ceiling]
    borrowed: list[str] = []
    if not lat:
        raise CurveError("no point with a measured TTFT and TPOT p99")
    top = lat[-1]
    if ceilings:
        x_sat = max(max(p.out_tps for p in ceilings), top.out_tps * MIN_INF_OVER_SAT)
    else:
        ratios = [d.sat_over_point for d in donors if d.sat_over_point is not None]
        if not ratios:
            raise CurveError("no Offline point and no other pair to borrow a saturation from")
        x_sat = top.out_tps * max(_median(ratios), MIN_INF_OVER_SAT)
        borrowed.append(f"saturation x_sat = {x_sat:,.0f} (×{_median(ratios):.3f} of its point, {_names(donors)})")
    if len(lat) >= 2 and lat[0].out_tps < top.out_tps:
        a, x_inf = _fit_tpot(lat)
        p, w = _fit_ttft(lat, x_sat)
    else:
        if not donors:
            raise CurveError("one latency point and no other pair to borrow a shape from")
        u = _median([d.u for d in donors])
        x_inf = x_sat / u if u > 0 else math.inf  # donors whose TPOT did not rise with load: flat
        x_inf = max(x_inf, x_sat * MIN_INF_OVER_SAT)
        a = top.tpot_p99_s * (1 - top.out_tps / x_inf)  # type: ignore[operator]
        # TTFT follows the step through its point, TTFT ∝ TPOT^β: a prompt waits and prefills over decode
        # steps, each as long as TPOT (β = 1 would keep the point's ratio), but how fast TTFT stretches
        # with the step depends on how prompt-heavy the requests are: with prompts about as long as
        # outputs part of TTFT does not stretch (β < 1), with prompts ten times the output prompts queue
        # for prefill and TTFT stretches faster than the step (β > 1). So β comes from the pairs of the
        # nearest reference mix (docs/latency.md: leave-one-out, and why).
        ratio = top.ttft_p99_s / top.tpot_p99_s  # type: ignore[operator]
        beta, whence = _borrow_beta(_mix(points), donors if beta_donors is None else beta_donors)
        borrowed.append(
            f"shape u = {u:.3f} ({_names(donors)}); TTFT p99 ∝ TPOT p99^{beta:.2f} through its point ({whence})"
        )
        p0 = ratio * top.tpot_p99_s * (a / top.tpot_p99_s) ** beta  # type: ignore[operator]  # TTFT at no load
        return LatencyCurve(a, x_inf, x_sat, p0, 0.0, tuple(points), tuple(borrowed), ratio, beta, top.tpot_p99_s)
    x_inf = max(x_inf, x_sat * MIN_INF_OVER_SAT)
    return LatencyCurve(a, x_inf, x_sat, p, w, tuple(points), tuple(borrowed))


def _borrow_beta(mix: float | None, donors: Sequence[Shape]) -> tuple[float, str]:
    """β from the donors whose reference mix is nearest `mix` (in ratio; ties: the median), else every
    donor's median; never under 0, so TTFT never falls as the step grows. No donor with two latency
    points: β = 1, the point's TTFT ÷ TPOT ratio kept."""
    known = [d for d in donors if d.beta is not None]
    if not known:
        return 1.0, "no pair with two latency points to borrow from: its point's TTFT ÷ TPOT ratio"
    with_mix = [d for d in known if d.mix]
    if mix and with_mix:
        dist = {d.key: abs(math.log(d.mix / mix)) for d in with_mix}  # type: ignore[operator]
        near = min(dist.values())
        known = [d for d in with_mix if dist[d.key] <= near + 1e-9]
        whence = f"nearest reference mix, {known[0].mix:.2f} prompt per output token against its {mix:.2f}: "
    else:
        whence = "reference mix unknown: "
    beta = max(0.0, _median([d.beta for d in known]))  # type: ignore[misc]
    return beta, whence + _names(known)


def _names(donors: Sequence[Shape]) -> str:
    return "median of " + ", ".join(d.key for d in donors)


def _fit_tpot(lat: Sequence[MeasuredPoint]) -> tuple[float, float]:
    xs = [p.out_tps for p in lat]
    inv = [1.0 / p.tpot_p99_s for p in lat]  # type: ignore[operator]
    alpha, slope = linear_fit(xs, inv)
    if alpha <= 0 or slope >= 0:
        # TPOT not rising with load in the data: flat at the worst measured.
        return max(p.tpot_p99_s for p in lat), math.inf  # type: ignore[type-var,return-value]
    return 1.0 / alpha, alpha / -slope


def _fit_ttft(lat: Sequence[MeasuredPoint], x_sat: float) -> tuple[float, float]:
    rs = [(p.out_tps / x_sat) / (1 - p.out_tps / x_sat) for p in lat]
    ts = [float(p.ttft_p99_s) for p in lat]  # type: ignore[arg-type]
    p, w = linear_fit(rs, ts)
    if w <= 0:
        return max(ts), 0.0
    if p < 0:
        p = _FLOOR_SHARE * min(ts)
        w = max((t - p) / r for t, r in zip(ts, rs, strict=True))
    return p, w


def fit_pairs(
    pairs: dict[str, tuple[str, Sequence[MeasuredPoint]]],
) -> dict[str, LatencyCurve]:
    """Fit every pair `key → (accelerator, points)`: pairs with two latency points first, then the
    rest borrowing from the same accelerator's (else every accelerator's) fitted shapes."""
    curves: dict[str, LatencyCurve] = {}
    for key, (_, pts) in pairs.items():
        if len({p.out_tps for p in pts if p.has_latency}) >= 2 and any(p.is_ceiling for p in pts):
            curves[key] = fit(pts)
    shapes = {k: (pairs[k][0], c.shape(k)) for k, c in curves.items()}
    every = [s for _, s in shapes.values()]
    for key, (acc, pts) in pairs.items():
        if key in curves or not any(p.has_latency for p in pts):
            continue
        curves[key] = fit(pts, donors_for(acc, shapes), every)
    return curves


def donors_for(accelerator: str, shapes: dict[str, tuple[str, Shape]]) -> list[Shape]:
    same = [s for acc, s in shapes.values() if acc == accelerator]
    return same or [s for _, s in shapes.values()]
