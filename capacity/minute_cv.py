"""The minute-rate CV of an envelope (docs/planning.md "The minute-rate CV", issue 45.3): how it is
measured, and the catalogue default per workload kind in data/workload_cv.csv.

A trace's one-minute request counts vary for two reasons: the rate itself moves from minute to
minute, and a Poisson count at a steady rate is noisy (its CV is 1/√mean). The envelope replay draws
the first and adds the second itself (capacity.planning_workload), so the figure wanted is the rate's:
CV_rate² = CV_counts² − 1/mean (0 if negative). Only whole minutes count (a trace's last, partial
minute would look calm). A long record is measured hour by hour, each hour's minutes against that
hour's own mean, pooled weighted by requests: a daily cycle is not a burst (an envelope states one
mean rate and is replayed as an hour around it).

`python -m capacity.minute_cv data/azure_llm_2023_conv.csv data/azure_llm_2023_code.csv` prints each
trace's measurement (the catalogue's rows; tests/capacity/test_minute_cv.py checks that they agree).
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

CATALOGUE = Path(__file__).resolve().parents[1] / "data" / "workload_cv.csv"
DEFAULT_KIND = "conversation"


@dataclass(frozen=True)
class MinuteCv:
    requests: int
    minutes: int
    count_cv: float  # of the one-minute counts
    poisson_cv: float  # what a steady Poisson stream at the same mean shows: 1/√mean
    minute_rate_cv: float  # √(count_cv² − poisson_cv²), the envelope's parameter

    def words(self) -> str:
        return (
            f"{self.requests:,} requests in {self.minutes:,} whole minutes: one-minute counts vary with CV "
            f"{self.count_cv:.3f}, of which Poisson noise is {self.poisson_cv:.3f}, so the minute rate's CV is "
            f"√({self.count_cv:.3f}² − {self.poisson_cv:.3f}²) = {self.minute_rate_cv:.2f}"
        )


def of_counts(hours: Iterable[npt.ArrayLike]) -> MinuteCv | None:
    """Pooled over groups of one-minute counts (each an hour, zeros included); None without requests."""
    num = requests = minutes = 0.0
    count_sq = poisson_sq = 0.0
    for counts in hours:
        c = np.asarray(counts, dtype=np.float64)
        n = float(c.sum())
        if len(c) < 2 or n <= 0:
            continue
        mean = n / len(c)
        cv2 = float(c.var()) / mean**2
        count_sq += n * cv2
        poisson_sq += n / mean
        num += n * max(0.0, cv2 - 1 / mean)
        requests += n
        minutes += len(c)
    if requests <= 0:
        return None
    return MinuteCv(
        int(requests),
        int(minutes),
        math.sqrt(count_sq / requests),
        math.sqrt(poisson_sq / requests),
        math.sqrt(num / requests),
    )


def of_arrivals(arrival_s: npt.ArrayLike) -> MinuteCv | None:
    """A trace's arrival seconds: its whole minutes from the first arrival, hour by hour."""
    t = np.sort(np.asarray(arrival_s, dtype=np.float64))
    if len(t) < 2:
        return None
    t = t - t[0]
    whole = int(t[-1] // 60)
    minute = np.floor(t[t < whole * 60] / 60).astype(np.int64)
    counts = np.bincount(minute, minlength=whole)
    return of_counts(counts[h : h + 60] for h in range(0, whole, 60))


@dataclass(frozen=True)
class KindCv:
    kind: str
    minute_rate_cv: float
    trace: str  # the file in data/ it was measured on
    source: str  # words, shown beside an answer that uses it


@lru_cache(maxsize=1)
def catalogue() -> dict[str, KindCv]:
    """data/workload_cv.csv: kind, minute_rate_cv and the trace and method it was measured from."""
    with CATALOGUE.open(newline="", encoding="utf-8") as f:
        return {
            row["kind"]: KindCv(row["kind"], float(row["minute_rate_cv"]), row["trace"], row["source"])
            for row in csv.DictReader(f)
        }


def catalogue_cv(kind: str = DEFAULT_KIND) -> KindCv:
    """The catalogue's default for a workload kind (ValueError naming the kinds for an unknown one)."""
    known = catalogue()
    if kind not in known:
        raise ValueError(f"expected one of {', '.join(sorted(known))} (got {kind!r})")
    return known[kind]


def _main(paths: list[str]) -> None:
    from capacity.traces import parse_trace

    for p in paths:
        got = of_arrivals(parse_trace(Path(p).read_bytes()).arrival_s)
        print(f"{p}: {got.words() if got else 'no whole minutes'}")


if __name__ == "__main__":
    _main(sys.argv[1:])
