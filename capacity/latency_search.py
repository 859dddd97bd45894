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

STEP = 1.028  # the breaking rate is within 2.8 % of the first simulated miss
GROW = 1.25  # going up from rates that all meet the SLO, at least this factor a time (at most 4×)
MAX_FACTOR = 64.0  # past 64 × the planning rate (or under 1/64) the search stops and says so
LOG_CAP = math.log(3.0)
MAX_RUNS = 24  # simulations one search may add (regula falsi on log p99 ÷ limit against log rate)
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


def over(r: SimResult, slo: Slo) -> float:
    """How far the worse p99 is from its limit: ≤ 1 meets the SLO."""
    return max(r.ttft_p99_s / slo.ttft_p99_s, r.tpot_p99_s / slo.tpot_p99_s)


def _bracket(probe: Probe) -> tuple[float | None, float | None]:
    """From everything simulated: the last factor before the first miss, and that miss."""
    ok, miss = None, None
    for f in sorted(probe.runs):
        if not meets(probe.runs[f], probe.slo):
            miss = f
            break
        ok = f
    return ok, miss


def _log_over(probe: Probe, f: float) -> float:
    return math.log(max(over(probe.runs[f], probe.slo), 1e-9))


def _upward(probe: Probe, start: float) -> float:
    """Everything simulated meets the SLO: the start if it lies above, else an extrapolation of log
    over against log rate from the two highest rates (×1.25 to ×4)."""
    known = sorted(probe.runs)
    top = known[-1]
    if start > top * GROW:
        return start
    if len(known) < 2:
        return top * 4.0
    below = known[-2]
    slope = (_log_over(probe, top) - _log_over(probe, below)) / math.log(top / below)
    jump = math.exp(-_log_over(probe, top) / max(slope, 0.25)) * STEP
    return top * min(max(jump, GROW), 4.0)


def _between(probe: Probe, ok: float, miss: float, kept: tuple[str, int]) -> float:
    """Regula falsi on log(p99 ÷ limit) against log(rate) between a met and a missed rate, Illinois-
    style (an end kept k times in a row counts 2^-k), never nearer an end than a fifth of a STEP."""
    # Past saturation a p99 grows with the simulated span, not the rate: count at most 3× over.
    g_lo, g_hi = max(_log_over(probe, ok), -LOG_CAP), min(_log_over(probe, miss), LOG_CAP)
    if kept[0] == "miss":
        g_hi /= 2 ** kept[1]
    elif kept[0] == "ok":
        g_lo /= 2 ** kept[1]
    t = g_lo / (g_lo - g_hi) if g_hi > g_lo else 0.5
    span = math.log(miss / ok)
    edge = min(0.45, math.log(STEP) / 5 / span)
    return ok * math.exp(min(max(t, edge), 1 - edge) * span)


def breaking(probe: Probe, start: float = 1.0) -> Breaking:
    """The highest simulated factor with the SLO met there and at every lower one, within STEP of the
    first simulated miss. `start` is a guess (the fitted curve's breaking rate): it changes how many
    simulations the search takes, not the rule."""
    start = min(max(start, 1.0 / MAX_FACTOR), MAX_FACTOR)
    if not probe.runs:
        probe.run(start)
    kept: tuple[str, int] = ("", 0)  # the bracket's end that stayed put, and how many times in a row
    for _ in range(MAX_RUNS):
        ok, miss = _bracket(probe)
        if ok is not None and miss is not None:
            if miss / ok <= STEP:
                break
            f = _between(probe, ok, miss, kept)
        elif miss is None:
            if ok is None or ok >= MAX_FACTOR:
                break
            f = _upward(probe, start)
        else:
            if miss <= 1.0 / MAX_FACTOR:
                break
            f = miss / 4.0
        f = min(max(f, 1.0 / MAX_FACTOR), MAX_FACTOR)
        if f in probe.runs:
            break
        probe.run(f)
        if ok is not None and miss is not None:
            stayed = "miss" if meets(probe.runs[f], probe.slo) else "ok"
            kept = (stayed, kept[1] + 1 if kept[0] == stayed else 1)
    ok, miss = _bracket(probe)
    if miss is None:
        return Breaking(ok or 0.0, None, None, None)
    r = probe.runs[miss]
    ttft_over, tpot_over = r.ttft_p99_s / probe.slo.ttft_p99_s, r.tpot_p99_s / probe.slo.tpot_p99_s
    half = "TTFT" if ttft_over >= tpot_over else "TPOT"
    return Breaking(ok or 0.0, miss, half, max(ttft_over, tpot_over))


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
