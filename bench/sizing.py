"""Sizing from the 19k-request Azure conversation trace: parse + characterise + size with the KV
simulation replaying the trace's own timestamps and paired lengths, at the busiest minute (peak_1m),
searching three feasible operating points for the cheapest. Goal: well under 200 ms.

`--scaling` times whole size() calls on the trace at 1×, 10× and 50× its length (bench/planning.py's
scaled inputs: the trace tiled end to end, at its own timing), rounds interleaved with the order
rotated each round, and prints each median — wall time and this process's CPU time, which a loaded
machine disturbs less — its ratio to 1× and that ratio ÷ k (1.00 = linear in the trace; past
MAX_SIM_REQUESTS the KV replay is thinned, so 50× can be below), with the load before and after.

`--page` times what the calculator page (/sizing/) computes per view — sizing.calculator.calculator_figures:
the class, its day over the default diurnal curve, its cost per planning basis — on the conversation
trace at peak_1m and on the page's default quantiles, against the same call computing as it did before
issue 35.4 (every sizing with its own KV replays and its own CU to buy: KvReplays and `fleet_only`
patched out), interleaved with the order swapped each round; it prints the medians, their ratio and
the load, and checks that both give the same figures.

Run: .venv/bin/python bench/sizing.py [--scaling | --page] [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capacity.cost import CloudAccelerator  # noqa: E402
from capacity.kv_demand import simulate_class  # noqa: E402
from capacity.rate_basis import minute_rates  # noqa: E402
from capacity.sizing import (  # noqa: E402
    AcceleratorSpec,
    LengthSamples,
    ModelSpec,
    OperatingPoint,
    SizingInput,
    SizingResult,
    Slo,
    size,
)
from capacity.traces import characterise, parse_trace  # noqa: E402
from capacity.units import ReferenceMix  # noqa: E402

GOAL_S = 0.200
RUNS = 9

data = (Path(__file__).resolve().parents[1] / "data" / "azure_llm_2023_conv.csv").read_bytes()

# llama2-70b on 8 × H200, MLPerf v5.1 Server (measured p99 TTFT 1.717 s, TPOT 195.6 ms).
# KV: 80 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 bytes = 327,680 bytes per token.
# The reference mix is illustrative here; the catalogue carries the cited one.
MODEL = ModelSpec("llama2-70b", kv_bytes_per_token=327_680, context_length=4096, weights_gb=140, r_wt_per_s=1000)
POINT = OperatingPoint("H200 Server", "h200", 8, 34029.38, ReferenceMix(684, 283), 2.0, 0.2, 1.717, 0.1956)
# The point search sizes every feasible point in full: MLPerf v5.1 llama2-70b Server and Interactive on B200.
B200_SERVER = OperatingPoint("B200 Server", "b200", 8, 99123.04, ReferenceMix(684, 283), 2.0, 0.2, 0.436, 0.1324)
B200_INTERACTIVE = OperatingPoint(
    "B200 Interactive", "b200", 8, 59545.45, ReferenceMix(684, 283), 0.45, 0.04, 0.140, 0.0381
)
ACC = AcceleratorSpec("h200", memory_gb=141, cost=CloudAccelerator(on_demand_per_hour=3.5))
B200 = AcceleratorSpec("b200", memory_gb=180, cost=CloudAccelerator(on_demand_per_hour=6.0))


def run() -> tuple[dict[str, float], SizingResult]:
    t0 = time.perf_counter()
    trace = parse_trace(data)
    t1 = time.perf_counter()
    characterise(trace)
    rate = minute_rates(trace.arrival_s).rate("peak_1m")
    t2 = time.perf_counter()
    inp = SizingInput(
        model=MODEL,
        operating_points=(POINT, B200_SERVER, B200_INTERACTIVE),
        accelerators=(ACC, B200),
        arrival_rate_rps=rate,
        prompt_tokens=LengthSamples(trace.prompt),
        output_tokens=LengthSamples(trace.output),
        arrival_times_s=trace.arrival_s,
        slo=Slo(2.0, 0.2),
        failure_policy="zone",
        zones=3,
    )
    result = size(inp)
    t3 = time.perf_counter()
    simulate_class(replace(inp, operating_points=(result.operating_point_used,)), result.ttft_s, result.tpot_s)
    t4 = time.perf_counter()
    size(replace(inp, operating_points=(result.operating_point_used,)))
    t5 = time.perf_counter()
    return {
        "parse": t1 - t0,
        "characterise": t2 - t1,
        "size": t3 - t2,
        "total": t3 - t0,
        "kv_sim": t4 - t3,
        "size_one_point": t5 - t4,
    }, result


def load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def trace_arrivals(inp: SizingInput) -> np.ndarray:
    assert inp.arrival_times_s is not None
    return inp.arrival_times_s


def scaling(rounds: int) -> None:
    from bench.planning import scaled_input

    ks = (1, 10, 50)
    inputs = {k: scaled_input(k) for k in ks}
    for k in ks:
        size(inputs[k])  # warm
    print(f"size() at k× the conversation trace; load average before: {load()}")
    wall: dict[int, list[float]] = {k: [] for k in ks}
    cpu: dict[int, list[float]] = {k: [] for k in ks}
    for i in range(rounds):
        for k in ks[i % 3 :] + ks[: i % 3]:
            w0, c0 = time.perf_counter(), time.process_time()
            size(inputs[k])
            wall[k].append(time.perf_counter() - w0)
            cpu[k].append(time.process_time() - c0)
    one_wall, one_cpu = statistics.median(wall[1]), statistics.median(cpu[1])
    for k in ks:
        w, c = statistics.median(wall[k]), statistics.median(cpu[k])
        requests = len(trace_arrivals(inputs[k]))
        print(
            f"  {k:>2}× ({requests:,} requests): wall {w * 1e3:.1f} ms = "
            f"{w / one_wall:.2f}× the 1× (÷ k {w / one_wall / k:.2f}); CPU {c * 1e3:.1f} ms = {c / one_cpu:.2f}× "
            f"(÷ k {c / one_cpu / k:.2f}); median of {rounds} interleaved rounds"
        )
    print(f"  load average after: {load()}")


def page(rounds: int) -> None:
    import contextlib
    from unittest import mock

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    import capacity.diurnal
    import sizing.calculator as calculator
    from capacity.lengths import LengthQuantiles
    from capacity.rate_basis import minute_rates as rates_of
    from portal.forms import DEFAULT_DIURNAL, SIZING_DEFAULTS
    from sizing.parsing import PreparedSizing

    trace = parse_trace(data)
    rates = rates_of(trace.arrival_s)
    base = SizingInput(
        model=MODEL,
        operating_points=(POINT, B200_SERVER, B200_INTERACTIVE),
        accelerators=(ACC, B200),
        arrival_rate_rps=rates.rate("peak_1m"),
        prompt_tokens=LengthSamples(trace.prompt),
        output_tokens=LengthSamples(trace.output),
        arrival_times_s=trace.arrival_s,
        trace_own_timing=True,
        slo=Slo(2.0, 0.2),
        failure_policy="zone",
        zones=3,
    )
    d = SIZING_DEFAULTS
    quantiles = replace(
        base,
        arrival_rate_rps=float(d["arrival_rate_rps"]),
        prompt_tokens=LengthQuantiles(*(float(d[f"prompt_{q}"]) for q in ("mean", "p50", "p95", "p99"))),
        output_tokens=LengthQuantiles(*(float(d[f"output_{q}"]) for q in ("mean", "p50", "p95", "p99"))),
        arrival_times_s=None,
        trace_own_timing=False,
    )
    cases = {
        "trace at peak_1m": PreparedSizing(base, None, (), None, "peak_1m", rates),  # type: ignore[arg-type]
        "default quantiles": PreparedSizing(quantiles, None, (), None),  # type: ignore[arg-type]
    }

    def before() -> contextlib.ExitStack:
        """The computation as it was: no shared replays, the CU to buy in every sizing."""
        stack = contextlib.ExitStack()
        stack.enter_context(mock.patch.object(calculator, "KvReplays", lambda: None))
        for module in (calculator, capacity.diurnal):
            stack.enter_context(mock.patch.object(module, "size", lambda inp, **_kw: size(inp)))
        return stack

    def figures(prepared: PreparedSizing) -> tuple[str, str, dict[str, float]]:
        calc = calculator.calculator_figures(prepared, hourly_multipliers=DEFAULT_DIURNAL)
        return repr(calc.result.to_dict()), repr(calc.day.to_dict()), calc.basis_costs

    print(f"the calculator page's figures per view; load average before: {load()}")
    for name, prepared in cases.items():
        with before():
            old = figures(prepared)
        assert figures(prepared) == old, name
        times: dict[str, list[float]] = {"before": [], "now": []}
        for i in range(rounds):
            for side in ("before", "now")[:: 1 if i % 2 else -1]:
                with before() if side == "before" else contextlib.nullcontext():
                    t0 = time.perf_counter()
                    calculator.calculator_figures(prepared, hourly_multipliers=DEFAULT_DIURNAL)
                    times[side].append(time.perf_counter() - t0)
        b, n = statistics.median(times["before"]), statistics.median(times["now"])
        print(
            f"  {name}: {n * 1e3:.1f} ms now vs {b * 1e3:.1f} ms before ({n / b:.2f}×), median of {rounds} "
            f"interleaved rounds; the same figures"
        )
    print(f"  load average after: {load()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scaling", action="store_true", help="size() at 1×, 10× and 50× the trace")
    ap.add_argument("--page", action="store_true", help="the calculator page's figures, now vs before")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if args.page:
        page(args.rounds)
        return
    if args.scaling:
        scaling(args.rounds)
        return
    run()  # warm caches and imports
    samples = [run()[0] for _ in range(RUNS)]
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    r = run()[1]
    ms = {k: v * 1e3 for k, v in med.items()}
    print(f"sizing from the 19,366-request trace, median of {RUNS} runs:")
    print(f"  parse {ms['parse']:.1f} ms, characterise {ms['characterise']:.1f} ms, size {ms['size']:.1f} ms")
    print(
        f"  total {ms['total']:.1f} ms; KV simulation {ms['kv_sim']:.1f} ms = {med['kv_sim'] / med['total']:.0%} "
        f"of the total"
    )
    print(
        f"  the point search sizes {len(r.alternatives) + 1} points: {ms['size']:.1f} ms vs "
        f"{ms['size_one_point']:.1f} ms for the chosen point alone ({med['size'] / med['size_one_point']:.2f}×)"
    )
    print(f"  ratio to the 200 ms goal: {med['total'] / GOAL_S:.2f}× ({'met' if med['total'] < GOAL_S else 'MISSED'})")
    print(f"  load average {load()}")
    print(
        f"  result: KV p99 {r.kv_tokens_p99:,.0f} tokens, mean concurrency {r.mean_concurrency:.1f} "
        f"(simulated {r.kv.mean_concurrency:.1f}), replicas {r.replicas.to_dict()}; chosen "
        f"{r.operating_point_used.label} of {len(r.alternatives) + 1} feasible"
    )


if __name__ == "__main__":
    main()
