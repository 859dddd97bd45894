"""A launch request's planning answer across 64 draws (issue 45.2) beside the one seeded draw it
replaced, on the same envelope (5 req/s, prompt 1,000 / 4,000 / 6,000, output 200 / 800 / 2,000 tokens
p50 / p95 / max, w_out 4, R 1,000 wt/s per CU) at CV 0, 0.21 and 1.5. Rounds interleave the two, order
swapped each round; prints each median, their ratio and the load average.

Run: .venv/bin/python bench/envelope_draws.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.envelope import envelope_lengths  # noqa: E402
from capacity.planning import plan  # noqa: E402
from capacity.planning_workload import envelope_workload  # noqa: E402
from capacity.realisations import envelope_answer  # noqa: E402

PROMPT = envelope_lengths(1000, 4000, 6000)
OUTPUT = envelope_lengths(200, 800, 2000)


def many(cv: float) -> str:
    a = envelope_answer(
        rate_rps=5.0, prompt=PROMPT, output=OUTPUT, w_out=4.0, minute_rate_cv=cv, r_wt_per_s=1000.0,
        target_throttled_share=0.001,
    )  # fmt: skip
    return a.check


def one(cv: float) -> str:
    w = envelope_workload(rate_rps=5.0, prompt=PROMPT, output=OUTPUT, w_out=4.0, minute_rate_cv=cv)
    return plan(w, r_wt_per_s=1000.0).check


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for cv in (0.0, 0.21, 1.5):
        times: dict[str, list[float]] = {"64 draws": [], "1 draw": []}
        said = {}
        for r in range(rounds):
            order = [("64 draws", many), ("1 draw", one)]
            for name, fn in order if r % 2 == 0 else order[::-1]:
                t = time.perf_counter()
                said[name] = fn(cv)
                times[name].append(time.perf_counter() - t)
        m64, m1 = statistics.median(times["64 draws"]), statistics.median(times["1 draw"])
        print(f"CV {cv}: 64 draws {m64:.3f} s, 1 draw {m1:.3f} s, ratio {m64 / m1:.1f}; load {os.getloadavg()[0]:.2f}")
        print(f"  64 draws: {said['64 draws']}")
        print(f"  1 draw:   {said['1 draw']}")


if __name__ == "__main__":
    main()
