"""Sizing with the serving curve vs plain sizing, on the 19k-request Azure conversation trace at its
busiest minute (peak_1m): parse once, then interleaved pairs — plain `size()` and `size()` + the
latency report (curve fitted on the catalogue CSV, the simulation at the planning rate, the breaking
rate's search, one replica more and less, the SLO fleet's check). Goal: the pair under 1 s, and the
latency answer near 2.4× plain sizing (its cost before issue 46). The order inside each pair
alternates; the ratio printed is the median of the pairs' ratios.

Run: .venv/bin/python bench/latency.py
"""

from __future__ import annotations

import csv
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.cost import CloudAccelerator  # noqa: E402
from capacity.latency_curve import fit_pairs  # noqa: E402
from capacity.latency_report import latency_report  # noqa: E402
from capacity.latency_validation import pairs_from_rows  # noqa: E402
from capacity.rate_basis import minute_rates  # noqa: E402
from capacity.sizing import AcceleratorSpec, LengthSamples, ModelSpec, OperatingPoint, SizingInput, Slo, size  # noqa: E402  # noqa: E402
from capacity.traces import parse_trace  # noqa: E402
from capacity.units import ReferenceMix  # noqa: E402

# bench/sizing.py's catalogue: llama2-70b, MLPerf v5.1 Server on 8 × H200 and Server / Interactive on 8 × B200.
MODEL = ModelSpec("llama2-70b", kv_bytes_per_token=327_680, context_length=4096, weights_gb=140, r_wt_per_s=1000)
MIX = ReferenceMix(684, 283)
POINT = OperatingPoint("H200 Server", "h200", 8, 34029.38, MIX, 2.0, 0.2, 1.717, 0.1956)
B200_SERVER = OperatingPoint("B200 Server", "b200", 8, 99123.04, MIX, 2.0, 0.2, 0.436, 0.1324)
B200_INTERACTIVE = OperatingPoint("B200 Interactive", "b200", 8, 59545.45, MIX, 0.45, 0.04, 0.140, 0.0381)
ACC = AcceleratorSpec("h200", memory_gb=141, cost=CloudAccelerator(on_demand_per_hour=3.5))
B200 = AcceleratorSpec("b200", memory_gb=180, cost=CloudAccelerator(on_demand_per_hour=6.0))

ROOT = Path(__file__).resolve().parents[1]
PAIRS = 9
GOAL_S = 1.0

trace = parse_trace((ROOT / "data" / "azure_llm_2023_conv.csv").read_bytes())
rates = minute_rates(trace.arrival_s)
with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
    pairs = pairs_from_rows(csv.DictReader(fh))
inp = SizingInput(
    model=MODEL,
    operating_points=(POINT, B200_SERVER, B200_INTERACTIVE),
    accelerators=(ACC, B200),
    arrival_rate_rps=rates.rate("peak_1m"),
    prompt_tokens=LengthSamples(trace.prompt),
    output_tokens=LengthSamples(trace.output),
    arrival_times_s=trace.arrival_s,
    slo=Slo(2.0, 0.2),
    failure_policy="zone",
    zones=3,
)
KEYS = {"H200 Server": "NVIDIA H200-SXM-141GB (Nebius", "B200 Server": "NVIDIA B200-SXM-180GB (NVIDIA"}


def plain() -> float:
    t = time.perf_counter()
    size(inp)
    return time.perf_counter() - t


def with_curve() -> tuple[float, dict[str, object]]:
    t = time.perf_counter()
    result = size(inp)
    curves = fit_pairs(pairs)
    label = result.operating_point_used.label
    key = next(k for k in curves if k.startswith("llama2-70b-99 on 8×") and KEYS.get(label, "?") in k)
    report = latency_report(inp, result, curves[key], rates)
    return time.perf_counter() - t, report


with_curve()  # warm imports and caches
plain_s, curve_s, ratios = [], [], []
for i in range(PAIRS):
    if i % 2:
        a, (b, report) = plain(), with_curve()
    else:
        (b, report), a = with_curve(), plain()
    plain_s.append(a)
    curve_s.append(b)
    ratios.append(b / a)
med_plain, med_curve = statistics.median(plain_s), statistics.median(curve_s)
print(
    f"sizing the 19,366-request trace at its busiest minute ({inp.arrival_rate_rps:.2f} req/s), {PAIRS} interleaved pairs:"
)
print(f"  plain sizing {med_plain * 1e3:.1f} ms, with the curve {med_curve * 1e3:.1f} ms (medians)")
print(f"  ratio with / plain: {statistics.median(ratios):.2f}× (median of the pairs' ratios)")
print(
    f"  goal under {GOAL_S:.0f} s: {'met' if max(curve_s) < GOAL_S else 'MISSED'} (slowest {max(curve_s) * 1e3:.0f} ms)"
)
print("  load average {:.2f} / {:.2f} / {:.2f} on {} cores".format(*os.getloadavg(), os.cpu_count()))
lu = report["latency_under_load"]
assert isinstance(lu, dict)
print(
    f"  answer: breaks at {report['slo_breaking_rate_rps']:.2f} req/s ({lu['breaking_over_planning']:.2f}× the peak) "
    f"on {lu['replicas']} replicas; attainment {report['slo_attainment']:.4f}; {lu['simulation']}"
)
