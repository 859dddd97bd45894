"""Young level shifts, seen within days (issue 47; docs/forecasting.md "Level shifts").

The weekly test in forecasting.candidates (`recent_break`) needs two whole weeks each side of a step, so a
step under three weeks old used to be averaged away. This detector works on **daily levels**: each whole
day's mean demand divided by its day-of-week factor (the median ratio of that weekday to its week's mean over
the weeks before the scan window), so a weekend is not a step. It is a two-sided CUSUM of those levels
against the reference level before a candidate change day (the maximum-likelihood change point of a mean
shift): for every split 3–20 days back, the mean of the days after against the reference's, in units of the
reference's robust noise (1.4826 × MAD). A split counts when

- the standardised shift is at least Z (a run of ordinary days does not reach it),
- the relative step is at least MIN_STEP (a 20 % step passes three days after it; a 10 % wobble does not),
- every one of the last CONFIRM days sits past half the step on the same side: a spike that reverts (a
  burst, a busy day or two) leaves the latest days at the old level, so it is not a step.

The thresholds were
chosen on the backtest in bench/change_points.py (detection delay on 20–60 % steps against false alarms on
stationary, trending, bursty and spiky series) and are documented in docs/forecasting.md.

After a step, `reanchor` scales the history before it by (level after ÷ level before), so every candidate,
the naive ones and the guard included, sees one level — what followed the step — with the shapes the
history taught; `young_widening` is how much wider the bands are until MIN_SETTLED_WEEKS have passed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from forecasting.candidates import DAY

SCAN_DAYS = 21  # younger than three weeks: older steps are the weekly test's (candidates.recent_break)
MIN_DAYS_AFTER = 3  # a step is judged on at least three whole days after it
REF_DAYS = 28  # the reference level: up to four weeks before the candidate change day
MIN_REF_DAYS = 7
Z = 5.0  # standardised shift of the days after against the reference's noise
MIN_STEP = 0.15  # relative step: 20 % steps pass with margin, day-to-day wobble does not
CONFIRM = 2  # the latest days that must sit past half the step: a spike that reverts is not a step
MIN_SETTLED_WEEKS = 3  # the bands stay widened until this many weeks have followed the step
NOISE_FLOOR = 0.02  # a noiseless history would make any difference infinitely significant


@dataclass(frozen=True)
class Step:
    days_back: int  # the change day, counted back from the end (the step's first day is `days_back` ago)
    ratio: float  # level after ÷ level before
    z: float

    @property
    def hours_back(self) -> int:
        return self.days_back * DAY

    @property
    def weeks_since(self) -> float:
        return self.days_back / 7

    def describe(self) -> str:
        return f"level shift {self.days_back} days ago ({(self.ratio - 1) * 100:+.0f} %)"


def _days(values: np.ndarray) -> np.ndarray:
    k = len(values) // DAY
    return values[len(values) - k * DAY :].reshape(k, DAY).mean(axis=1)


def weekday_factors(days: np.ndarray, before: int) -> np.ndarray:
    """Per position in the week (counted back from the end, so position of day i is i % 7 in `days`'
    own indexing aligned at its end): the median of day ÷ its week's mean over the whole weeks in
    days[:before]; ones when there is no whole week."""
    n = len(days)
    offset = n % 7  # days[offset:] is whole weeks aligned with the end
    usable = (before - offset) // 7
    if usable < 1:
        return np.ones(7)
    weeks = days[offset : offset + usable * 7].reshape(usable, 7)
    means = weeks.mean(axis=1, keepdims=True)
    ratios = np.divide(weeks, means, out=np.ones_like(weeks), where=means > 0)
    f = np.median(ratios, axis=0)
    m = float(f.mean())
    return f / m if m > 0 else np.ones(7)


def adjusted_days(values: np.ndarray) -> np.ndarray:
    """Whole days' mean demand ÷ their weekday factor (factors from the weeks before the scan window)."""
    days = _days(values)
    n = len(days)
    f = weekday_factors(days, max(n - SCAN_DAYS, 0))
    pos = (np.arange(n) - n % 7) % 7
    return days / np.where(f[pos] > 0, f[pos], 1.0)


def change_day(lv: np.ndarray) -> int | None:
    """Days back of the most likely single change in the last SCAN_DAYS (a mean shift's maximum-likelihood
    split: the least squared error of two flat segments over the scan window and its reference)."""
    window = lv[max(0, len(lv) - SCAN_DAYS - REF_DAYS) :]
    best: tuple[float, int] | None = None
    for k in range(MIN_DAYS_AFTER, min(SCAN_DAYS, len(window) - MIN_REF_DAYS) + 1):
        a, b = window[:-k], window[-k:]
        sse = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
        if best is None or sse < best[0]:
            best = (sse, k)
    return best[1] if best else None


def detect(values: np.ndarray) -> Step | None:
    """The level shift 3–20 days back in an hourly series, or None."""
    lv = adjusted_days(values)
    n = len(lv)
    k = change_day(lv)
    if k is None:
        return None
    ref, after = lv[max(0, n - k - REF_DAYS) : n - k], lv[n - k :]
    base = float(np.median(ref))
    if base <= 0:
        return None
    noise = max(1.4826 * float(np.median(np.abs(ref - base))), NOISE_FLOOR * base)
    shift = float(after.mean()) - base
    z = abs(shift) / (noise * np.sqrt(1.0 / k + 1.0 / len(ref)))
    if z < Z or abs(shift) < MIN_STEP * base:
        return None
    # The latest days confirm it, each past half the step on its side: a spike that reverts does not.
    latest = lv[n - min(CONFIRM, k) :] - base
    if not np.all(np.sign(shift) * latest > 0.5 * abs(shift)):
        return None
    # One odd day after the change does not make it: the median of the days after clears the step too.
    if abs(float(np.median(after)) - base) < MIN_STEP * base:
        return None
    # The size from the means (the efficient estimate on day-averaged levels); the median only tested it.
    before = float(ref.mean())
    return Step(days_back=k, ratio=float(after.mean()) / before if before > 0 else 1.0, z=round(float(z), 2))


def reanchor(values: np.ndarray, step: Step) -> np.ndarray:
    """The history with everything before the step scaled to the level after it."""
    out = values.astype(float).copy()
    out[: len(out) - step.hours_back] *= step.ratio
    return out


def young_widening(step: Step | None) -> float:
    """Extra relative band width (in units of the week's level) while the step is young: its size, shrinking
    to nothing once MIN_SETTLED_WEEKS have followed it (the new level may not hold, or may move again)."""
    if step is None:
        return 0.0
    left = max(0.0, 1.0 - step.weeks_since / MIN_SETTLED_WEEKS)
    return abs(step.ratio - 1.0) * left
