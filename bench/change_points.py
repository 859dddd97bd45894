"""The young-step detector's thresholds, chosen on a backtest (issue 47; forecasting/change_points.py).

For each (Z, MIN_STEP) pair: the share of 20–60 % steps up and down found by day 3 and by day 4 after the
step (at the right day), and false alarms on series with no step — steady, trending (+4 %/week), noisy
(25 % lognormal), weekends at 40 %, bursty (single hours × 4) and one or two busy days (× 1.5–3) that
revert — each series checked at every end from 3 to 20 days after its last change. No database, no fits.

    .venv/bin/python bench/change_points.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django  # noqa: E402

django.setup()  # the test helper that draws the series imports a model module

from forecasting import change_points as cp  # noqa: E402
from tests.forecasting.helpers import cycles_cu  # noqa: E402

W = 168
N = 16 * W


def stepped(seed: int, factor: float, days_before_end: int) -> np.ndarray:
    v = cycles_cu(N, base=10, seed=seed)
    v[N - days_before_end * 24 :] *= factor
    return v


def quiet(seed: int, kind: str, rng: np.random.Generator) -> np.ndarray:
    if kind == "trend":
        return cycles_cu(N, base=10, trend_per_week=0.04, seed=seed)
    if kind == "noisy":
        return cycles_cu(N, base=10, seed=seed) * rng.lognormal(0, 0.25, N)
    if kind == "weekend":
        return cycles_cu(N, base=10, weekend=0.4, seed=seed)
    v = cycles_cu(N, base=10, seed=seed)
    if kind == "bursty":
        v[rng.choice(N, 20, replace=False)] *= 4
    if kind == "spike":
        at = N - int(rng.integers(3, 20)) * 24
        v[at : at + int(rng.integers(1, 3)) * 24] *= rng.uniform(1.5, 3.0)
    return v


def main() -> None:
    rng = np.random.default_rng(47)
    steps = [(s, f) for s in range(12) for f in (1.2, 1.3, 1.6, 0.8, 0.7, 0.5)]
    quiets = [quiet(s, k, rng) for s in range(12) for k in ("steady", "trend", "noisy", "weekend", "bursty", "spike")]
    print(f"{'Z':>4} {'step':>5}  found by day 3  by day 4   false alarms")
    for z in (3.0, 4.0, 5.0, 6.0):
        for min_step in (0.10, 0.15, 0.20):
            cp.Z, cp.MIN_STEP = z, min_step
            found3 = sum((d := cp.detect(stepped(s, f, 3))) is not None and d.days_back == 3 for s, f in steps)
            found4 = sum((d := cp.detect(stepped(s, f, 4))) is not None and d.days_back == 4 for s, f in steps)
            alarms = sum(cp.detect(v) is not None for v in quiets)
            print(
                f"{z:4.1f} {min_step:5.2f}  {found3 / len(steps):13.0%}  {found4 / len(steps):8.0%}   "
                f"{alarms}/{len(quiets)}"
            )


if __name__ == "__main__":
    main()
