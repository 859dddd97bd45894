"""Where the answer's own simulation breaks the SLO (docs/latency.md, "One latency truth").

The breaking rate, the attainment, the p50 / p99s at each rate and the SLO fleet all come from one
model: the batching simulation on the sized fleet (capacity/batching_sim.py with the fleet's step law).
Every rate replays the same requests, only squeezed or stretched in time (common random numbers), and
the reported figures are the monotone envelope over the rates simulated — a p99 at a rate is the worst
seen at that rate or any lower one — so a simulated p99 never falls with load, and the breaking rate is
the highest simulated rate below which no simulated rate misses the SLO: where the simulation misses
the SLO at a rate, the breaking rate is below it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from capacity.batching_sim import SimResult
from capacity.latency_fleet import Fleet, Workload, simulate_fleet
from capacity.operating_points import Slo

GROW = 1.25  # bracket the breaking rate by this factor from the start (the fitted curve's breaking rate)
MAX_FACTOR = 64.0  # past 64 × the planning rate (or under 1/64) the search stops and says so
BISECT = 3  # geometric bisection steps inside the bracket: within 1.25^(1/8) ≈ 2.8 %
LATENCIES = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


def meets(r: SimResult, slo: Slo) -> bool:
    return r.ttft_p99_s <= slo.ttft_p99_s and r.tpot_p99_s <= slo.tpot_p99_s


@dataclass
class Probe:
    """The simulations of one fleet of `replicas` at rates `factor × planning rate`, each run once."""

    fleet: Fleet
    work: Workload
    replicas: int
    slo: Slo
    kv_budget: float
    w_out: float
    rate_rps: float

    def __post_init__(self) -> None:
        self.runs: dict[float, SimResult] = {}

    def run(self, factor: float) -> SimResult:
        if factor not in self.runs:
            work = self.work.at_rate(factor)
            self.runs[factor] = simulate_fleet(self.fleet, work, self.replicas, self.slo, self.kv_budget, self.w_out)
        return self.runs[factor]

    def holds_to(self, factor: float) -> bool:
        """The SLO is met at `factor` and at every lower factor simulated so far."""
        self.run(factor)
        return all(meets(r, self.slo) for f, r in self.runs.items() if f <= factor)

    def envelope(self) -> list[dict[str, Any]]:
        """Every simulated rate, low to high, with p50 / p99s as the running maximum and attainment as
        the running minimum (the raw figures under `raw`)."""
        out: list[dict[str, Any]] = []
        worst = dict.fromkeys(LATENCIES, 0.0)
        att = 1.0
        for f in sorted(self.runs):
            r = self.runs[f]
            lat = r.latency()
            worst = {k: max(worst[k], lat[k]) for k in LATENCIES}
            att = min(att, r.attainment)
            out.append(
                {
                    "factor": f,
                    "rate_rps": f * self.rate_rps,
                    "replicas": self.replicas,
                    **worst,
                    "slo_attainment": att,
                    "meets_slo": worst["ttft_p99_s"] <= self.slo.ttft_p99_s
                    and worst["tpot_p99_s"] <= self.slo.tpot_p99_s,
                    "raw": {**lat, "slo_attainment": r.attainment},
                    "note": r.note,
                }
            )
        return out

    def at(self, factor: float) -> dict[str, Any]:
        self.run(factor)
        return next(e for e in self.envelope() if e["factor"] == factor)


@dataclass(frozen=True)
class Breaking:
    """`factor` × the planning rate is the highest simulated rate with the SLO met there and below;
    `first_miss` the lowest simulated factor that misses (None: none up to MAX_FACTOR)."""

    factor: float
    first_miss: float | None
    half: str | None  # "TTFT" or "TPOT": the one further over its limit at the first miss
    over: float | None  # that p99 ÷ its limit


def breaking(probe: Probe, start: float = 1.0) -> Breaking:
    """Bracket from `start` × the planning rate (a guess: any start gives the same rule), then bisect."""
    lo: float | None
    hi: float | None
    start = min(max(start, 1.0 / MAX_FACTOR), MAX_FACTOR)
    if probe.holds_to(start):
        lo, hi = start, None
        while hi is None and lo < MAX_FACTOR:
            g = lo * GROW
            lo, hi = (g, None) if probe.holds_to(g) else (lo, g)
    else:
        lo, hi = None, start
        while lo is None and hi > 1.0 / MAX_FACTOR:
            g = hi / GROW
            lo, hi = (g, hi) if probe.holds_to(g) else (None, g)
    if lo is not None and hi is not None:
        for _ in range(BISECT):
            m = math.sqrt(lo * hi)
            lo, hi = (m, hi) if probe.holds_to(m) else (lo, m)
    # From everything simulated (the chart's rates included): the last rate before the first miss.
    ok, miss = 0.0, None
    for f in sorted(probe.runs):
        if not meets(probe.runs[f], probe.slo):
            miss = f
            break
        ok = f
    if miss is None:
        return Breaking(ok, None, None, None)
    r = probe.runs[miss]
    ttft_over, tpot_over = r.ttft_p99_s / probe.slo.ttft_p99_s, r.tpot_p99_s / probe.slo.tpot_p99_s
    half = "TTFT" if ttft_over >= tpot_over else "TPOT"
    return Breaking(ok, miss, half, max(ttft_over, tpot_over))


def slo_fleet_replicas(
    probe_for: Any, steady: int, breaking_factor: float, floor: int, cap: int
) -> tuple[int | None, dict[str, Any] | None, dict[str, Any] | None]:
    """The fewest replicas (≥ `floor`) at which the simulation meets the SLO at the planning rate, with
    the check: that fleet's simulation and one replica less's. `probe_for(n)` gives a Probe."""
    guess = steady if breaking_factor <= 0 else math.ceil(steady / breaking_factor)
    n = max(floor, 1, min(guess, cap))
    if probe_for(n).holds_to(1.0):
        while n - 1 >= max(floor, 1) and probe_for(n - 1).holds_to(1.0):
            n -= 1
    else:
        while not probe_for(n).holds_to(1.0):
            n += 1
            if n > cap:
                return None, None, None
    less = probe_for(n - 1).at(1.0) if n - 1 >= 1 else None
    return n, probe_for(n).at(1.0), less
