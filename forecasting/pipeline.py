"""Forecasts at the lead time (issue 32; docs/forecasting.md): series in, guarded forecasts out.

Per series: backtest every candidate at the horizons the history can score (forecasting.selection),
rank them by their error weighted toward the lead time (blended with the realised error of earlier
runs where there is one), and take the best whose whole path passes the guard on weekly level and
weekly peak (forecasting.guard); the naive candidates are judged like the others. Bands come from the
chosen method's backtest residuals, widened or narrowed by the realised coverage of earlier runs.
No database here, so the job, the tests and the benchmark run the same code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from forecasting import change_points, guard, selection
from forecasting.candidates import FITTED, LEAD_ORDER, NAIVE, TRENDED, WEEK, profile, since_break
from forecasting.demand import SeriesForecast
from forecasting.history import DemandSeries

DEFAULT_LEAD_WEEKS = 12  # the catalogue's default accelerator lead time, for a series no pool serves yet
TIE = 0.05  # candidates whose weighted error is within 5 % of the best passing one tie: the simplest wins
NAIVE_MARGIN = 1.10  # a chosen model more than 10 % worse than the best naive on the holdout gives way to it


@dataclass(frozen=True)
class Feedback:
    """What earlier runs' forecasts of this series did against what happened (forecasting.accuracy)."""

    realised: dict[str, float] = field(default_factory=dict)  # method → realised MASE at 1/4/13 weeks
    widen: float = 1.0  # band factor from the realised P90 coverage


def _trend_carries(values: np.ndarray, t: selection.LeadBacktest | None) -> tuple[bool, dict[str, Any]]:
    slope, far, p = guard.trend_slope(values)
    info: dict[str, Any] = {"slope_per_week": round(slope, 4), "p_value": round(p, 5), "significant": False}
    if t is None or t.plan is None or p >= guard.SIGNIFICANCE:
        return False, info
    h = str(t.plan.weeks)
    trended = min(t.row(n)["errors"][h] for n in TRENDED)
    flat = min(t.row(n)["errors"][h] for n in selection.FLAT)
    info["significant"] = bool(trended < flat)
    info["backtest"] = f"at {h} weeks the best trend model's MASE {trended:.2f} vs the best flat one's {flat:.2f}"
    return bool(info["significant"]), info


def _rank(t: selection.LeadBacktest | None, fb: Feedback) -> list[tuple[float, str]]:
    if t is None or t.plan is None:
        # No backtest: the robust recent level first, then the rest in their fixed order.
        return [(float(i), n) for i, n in enumerate(("level_shift", *[m for m in LEAD_ORDER if m != "level_shift"]))]
    ranked = []
    for r in t.candidates:
        s = r["selection_error"]
        if r["method"] in fb.realised:
            s = 0.5 * s + 0.5 * fb.realised[r["method"]]
        r["score"] = round(s, 4)
        ranked.append((s, LEAD_ORDER.index(r["method"]), r["method"]))
    return [(s, n) for s, _, n in sorted(ranked)]


def forecast_batch(
    batch: list[DemandSeries],
    *,
    horizon_h: int,
    lead_weeks: list[int] | None = None,
    feedback: list[Feedback] | None = None,
) -> list[SeriesForecast]:
    leads = lead_weeks or [DEFAULT_LEAD_WEEKS] * len(batch)
    fbs = feedback or [Feedback()] * len(batch)
    # After a level shift three weeks or more back a series is backtested, fitted and judged on what
    # followed it: the weeks before the step say nothing about the level to plan for. A younger step
    # (3–20 days, forecasting.change_points) re-anchors the history before it to the level after it.
    fit_on, steps = [], []
    for s in batch:
        v = since_break(s.values)
        step = change_points.detect(v)
        fit_on.append(change_points.reanchor(v, step) if step is not None else v)
        steps.append(step)
    tests = selection.backtest_lead(fit_on, leads)
    days = -(-horizon_h // 24)
    final = selection.fitted_daily(fit_on, FITTED, days)
    horizon_weeks = -(-horizon_h // WEEK)
    out = []
    for i, s in enumerate(batch):
        t = tests[i]
        carries, trend = _trend_carries(fit_on[i], t)
        allowed = guard.band(fit_on[i], horizon_weeks, carries)
        paths = {}
        refused: dict[str, str] = {}
        ranked = _rank(t, fbs[i])
        shape = profile(fit_on[i])
        for _, n in ranked:
            p = selection.path(n, fit_on[i], horizon_weeks * WEEK, final[n][i] if n in FITTED else None, shape)
            paths[n] = p
            refused[n] = guard.refusal(p, allowed)
        passing = [n for _, n in ranked if not refused[n]]
        note = (
            f"level shift {len(fit_on[i]) // WEEK} weeks ago: fitted after it" if len(fit_on[i]) < len(s.values) else ""
        )
        step = steps[i]
        if step is not None:
            note = "; ".join(
                filter(None, [note, f"{step.describe()}: earlier history re-anchored to it, bands widened"])
            )
        if passing:
            method = _simplest_tied(passing, ranked)
        else:
            # Nothing passes (a history too short or too wild for any of them): the recent level, held
            # to the band week by week, and the series says so.
            method = "level_shift"
            paths[method] = _clamp(paths[method], allowed)
            note = "no candidate stayed in the band: the recent level, held to it"
        if passing and refused[ranked[0][1]]:
            note = "; ".join(
                filter(
                    None,
                    [note, f"{ranked[0][1]} refused by the guard ({refused[ranked[0][1]]}): forecast with {method}"],
                )
            )
        beaten = ""
        if t is not None and passing:
            method, beaten = _naive_check(t, method, refused)
            if beaten:
                note = "; ".join(filter(None, [note, beaten]))
        runner = next((n for n in passing if n != method), None)
        if t is not None:
            for r in t.candidates:
                r["refused"] = refused.get(r["method"], "")
            t.method, t.runner_up, t.trend = method, runner, trend
            selection.calibrate_lead(t, fbs[i].widen)
            t.why = _why(t, ranked, refused, fbs[i], passing[0] if passing else method, beaten)
        p50 = paths[method][:horizon_h]
        p90, p99 = selection.lead_bands(t, p50, fbs[i].widen, extra=change_points.young_widening(steps[i]))
        out.append(
            SeriesForecast(
                key=s.key,
                method=method,
                history_hours=len(s.values),
                start=s.start + timedelta(hours=len(s.values)),
                p50=p50,
                p90=p90,
                p99=p99,
                history_tail=s.values[-WEEK:],
                backtest=t,
                note=note or ("" if t is not None else "history too short to backtest: the recent level"),
            )
        )
    return out


def _simplest_tied(passing: list[str], ranked: list[tuple[float, str]]) -> str:
    """The simplest (first in LEAD_ORDER) of the passing candidates whose weighted error is within TIE of the
    best passing one's: a difference that small is noise between origins, and the simpler holds up."""
    score = {n: s for s, n in ranked}
    best = score[passing[0]]
    tied = [n for n in passing if score[n] <= best * (1 + TIE) + 1e-9]
    return min(tied, key=LEAD_ORDER.index)


def _naive_check(t: selection.LeadBacktest, method: str, refused: dict[str, str]) -> tuple[str, str]:
    """(method, note): the chosen model against the guard-passing naive baselines on the holdout, which no
    choice saw. More than NAIVE_MARGIN worse than the best of them, it is replaced by that naive."""
    naive = [n for n in NAIVE if not refused.get(n) and t.row(n)["holdout_error"] is not None]
    if method in NAIVE or not naive or t.row(method)["holdout_error"] is None:
        return method, ""
    best = min(naive, key=lambda n: (t.row(n)["holdout_error"], NAIVE.index(n)))
    mine, theirs = t.row(method)["holdout_error"], t.row(best)["holdout_error"]
    if mine <= NAIVE_MARGIN * theirs + 1e-9:
        return method, ""
    return best, f"{method} lost to {best} on the holdout (MASE {mine:.2f} vs {theirs:.2f}): forecast with {best}"


def _clamp(p: np.ndarray, allowed: dict[str, list[float]]) -> np.ndarray:
    out = p.copy()
    for k in range(len(p) // WEEK):
        w = out[k * WEEK : (k + 1) * WEEK]
        level, peak = float(w.mean()), float(w.max())
        factor = 1.0
        if peak > allowed["peak_high"][k] and peak > 0:
            factor = allowed["peak_high"][k] / peak
        if level * factor < allowed["level_low"][k] and level > 0:
            factor = allowed["level_low"][k] / level
        out[k * WEEK : (k + 1) * WEEK] = w * factor
    return out


def _why(
    t: selection.LeadBacktest,
    ranked: list[tuple[float, str]],
    refused: dict[str, str],
    fb: Feedback,
    top: str,
    beaten: str,
) -> str:
    """`top` is the best-ranked candidate the guard passed; the chosen one differs after a tie or when the naive
    check (`beaten`, its note) replaced it."""
    assert t.plan is not None  # noqa: S101  # only called with a backtest
    lead_h = min(t.plan.horizons, key=lambda h: abs(h - t.lead_weeks))
    row = t.row(t.method)
    scored = (
        f"(scored at {', '.join(str(h) for h in t.plan.horizons)} weeks; MASE {row['errors'][str(lead_h)]:.2f} "
        f"at {lead_h} weeks)"
    )
    if t.method == top:
        lead = f"lowest error weighted toward the {t.lead_weeks}-week lead time among the candidates the guard passed"
    elif beaten:
        lead = f"the best naive baseline on the holdout: {beaten}"
    else:
        lead = f"within {TIE:.0%} of {top}'s weighted error, and simpler"
    parts = [f"{lead} {scored}"]
    if t.runner_up:
        parts.append(f"runner-up {t.runner_up} ({t.row(t.runner_up)['selection_error']:.2f} weighted)")
    for _, n in ranked:
        if n == t.method:
            break
        if refused.get(n):
            parts.append(f"{n} refused: {refused[n]}")
    if fb.realised:
        parts.append("realised error of earlier runs counted half")
    return "; ".join(parts)


def apply_committed(f: SeriesForecast, changes: list[tuple[datetime, datetime | None, float, str]]) -> None:
    """Committed-demand changes on the series' scope (an accepted reconciliation finding's
    CommittedAdjustment, still at its entitlement's version) move every band from their date to the
    entitlement's end: the change is known, so it is not left for the history to reveal weeks later."""
    said = []
    for start, until, delta, source in changes:
        a = max(0, int((start - f.start) / timedelta(hours=1)))
        b = len(f.p50) if until is None else max(0, min(len(f.p50), int((until - f.start) / timedelta(hours=1))))
        if a >= b:
            continue
        for arr in (f.p50, f.p90, f.p99):
            arr[a:b] = np.clip(arr[a:b] + delta, 0.0, None)
        said.append(f"{delta:+.2f} CU committed from {start:%Y-%m-%d} ({source})")
    if said:
        f.note = "; ".join(filter(None, [f.note, *said]))
