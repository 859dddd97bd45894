"""The planning answer (docs/planning.md) beside one plain sizing call, on the conversation trace
and on 50× its length (the trace repeated end to end: about two days of traffic, 970k requests).

Each pair runs the planning answer and a sizing call with the planning answer left out, order
swapped each pair; it prints the median of the pairs' ratios and the load average beside them.

`--scaling` times whole size() calls (planning answer included) on the trace at 1×, 10× and 50× its
length, lengths paired and tiled with the times, at the busiest minute's rate: rounds interleave the
three (order rotated each round) and it prints each median, its ratio to 1× and that ratio ÷ k
(1.00 = linear in the trace; a trace past MAX_SIM_REQUESTS replays only that many, so 50× is below).

Run: .venv/bin/python bench/planning.py [--pairs N] [--scaling [--rounds N]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import capacity.sizing as sizing_module  # noqa: E402
from capacity.cost import CloudAccelerator  # noqa: E402
from capacity.planning import PlanningAnswer, plan  # noqa: E402
from capacity.planning_workload import trace_workload  # noqa: E402
from capacity.rate_basis import minute_rates  # noqa: E402
from capacity.sizing import AcceleratorSpec, LengthSamples, ModelSpec, OperatingPoint, SizingInput, Slo, size  # noqa: E402  # noqa: E402
from capacity.traces import parse_trace  # noqa: E402
from capacity.units import ReferenceMix  # noqa: E402

# The same catalogue as bench/sizing.py (llama2-70b, MLPerf v5.1 Server and Interactive points).
MODEL = ModelSpec("llama2-70b", kv_bytes_per_token=327_680, context_length=4096, weights_gb=140, r_wt_per_s=1000)
POINT = OperatingPoint("H200 Server", "h200", 8, 34029.38, ReferenceMix(684, 283), 2.0, 0.2, 1.717, 0.1956)
B200_SERVER = OperatingPoint("B200 Server", "b200", 8, 99123.04, ReferenceMix(684, 283), 2.0, 0.2, 0.436, 0.1324)
B200_INTERACTIVE = OperatingPoint(
    "B200 Interactive", "b200", 8, 59545.45, ReferenceMix(684, 283), 0.45, 0.04, 0.140, 0.0381
)
ACC = AcceleratorSpec("h200", memory_gb=141, cost=CloudAccelerator(on_demand_per_hour=3.5))
B200 = AcceleratorSpec("b200", memory_gb=180, cost=CloudAccelerator(on_demand_per_hour=6.0))

trace = parse_trace((Path(__file__).resolve().parents[1] / "data" / "azure_llm_2023_conv.csv").read_bytes())


def lengthened(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    span = float(trace.arrival_s[-1]) + float(np.mean(np.diff(trace.arrival_s)))
    t = np.concatenate([trace.arrival_s + i * span for i in range(k)])
    return t, np.tile(trace.prompt, k), np.tile(trace.output, k)


def answer(t: np.ndarray, p: np.ndarray, o: np.ndarray) -> PlanningAnswer:
    w = trace_workload(t, p, o, w_out=MODEL.w_out, w_cached=MODEL.w_cached)
    return plan(w, r_wt_per_s=MODEL.r_wt_per_s)


def plain_sizing(t: np.ndarray) -> None:
    inp = SizingInput(
        model=MODEL,
        operating_points=(POINT, B200_SERVER, B200_INTERACTIVE),
        accelerators=(ACC, B200),
        arrival_rate_rps=len(trace) / float(trace.arrival_s[-1]),
        prompt_tokens=LengthSamples(trace.prompt),
        output_tokens=LengthSamples(trace.output),
        slo=Slo(2.0, 0.2),
        arrival_times_s=t,
        trace_own_timing=True,
    )
    # One plain sizing call: everything but the planning answer, timed as the calculator ran it before.
    done = answer(t[:2], trace.prompt[:2], trace.output[:2])
    with mock.patch.object(sizing_module, "planning_answer", lambda _inp: done):
        size(replace(inp))


def scaled_input(k: int) -> SizingInput:
    t, p, o = lengthened(k)
    return SizingInput(
        model=MODEL,
        operating_points=(POINT, B200_SERVER, B200_INTERACTIVE),
        accelerators=(ACC, B200),
        arrival_rate_rps=minute_rates(t).rate("peak_1m"),
        prompt_tokens=LengthSamples(p),
        output_tokens=LengthSamples(o),
        slo=Slo(2.0, 0.2),
        arrival_times_s=t,
        trace_own_timing=True,
    )


def scaling(rounds: int) -> None:
    ks = (1, 10, 50)
    inputs = {k: scaled_input(k) for k in ks}
    for k in ks:
        size(inputs[k])  # warm
    print(f"size() at k× the trace; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    times: dict[int, list[float]] = {k: [] for k in ks}
    for i in range(rounds):
        for k in ks[i % 3 :] + ks[: i % 3]:
            times[k].append(timed(size, inputs[k]))
    one = statistics.median(times[1])
    for k in ks:
        med, arrivals = statistics.median(times[k]), inputs[k].arrival_times_s
        print(
            f"  {k:>2}× ({len(arrivals) if arrivals is not None else 0:,} requests): size() {med * 1000:.1f} ms "
            f"(median of {rounds} interleaved rounds), {med / one:.1f}× the 1× time, ÷ k = {med / one / k:.2f} "
            f"(1.00 = linear)"
        )
    print(f"  load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


def timed(fn: object, *args: object) -> float:
    t0 = time.perf_counter()
    fn(*args)  # type: ignore[operator]
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--scaling", action="store_true", help="only size() at 1×, 10× and 50× the trace")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if args.scaling:
        scaling(args.rounds)
        return
    pairs = args.pairs
    one = (trace.arrival_s, trace.prompt, trace.output)
    many = lengthened(50)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name, arrays in (("conversation trace", one), ("50x its length", many)):
        a = answer(*arrays)
        print(f"{name}: {len(arrays[0]):,} requests; {a.check}")
    answer(*one)
    plain_sizing(trace.arrival_s)
    for name, arrays in (("conversation trace", one), ("50x its length", many)):
        ratios, plans, sizes = [], [], []
        for i in range(pairs):
            if i % 2:
                s = timed(plain_sizing, trace.arrival_s)
                p = timed(answer, *arrays)
            else:
                p = timed(answer, *arrays)
                s = timed(plain_sizing, trace.arrival_s)
            ratios.append(p / s)
            plans.append(p)
            sizes.append(s)
        print(
            f"{name}: planning answer {statistics.median(plans) * 1000:.1f} ms, one plain sizing call "
            f"{statistics.median(sizes) * 1000:.1f} ms; ratio (median of {pairs} interleaved pairs) "
            f"{statistics.median(ratios):.2f}x"
        )
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
