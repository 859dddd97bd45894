"""Run in a child process by test_bounded_work: size the most demanding inputs the ranges allow
under RLIMIT_AS (imports + 256 MB) and RLIMIT_CPU, and print one JSON line per input with the CPU
seconds and peak memory it took. A child that breaks a limit dies (MemoryError or SIGXCPU), which
the parent sees as a failure.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from dataclasses import replace

import numpy as np

from capacity import kvsim
from capacity.lengths import LengthQuantiles, LengthSamples
from capacity.ranges import MAX_SIM_REQUESTS, MAX_TOKENS, RANGES
from capacity.sizing import SizingInput, size
from capacity.sizing_inputs import ModelSpec
from tests.capacity.test_sizing import make_input

EXTRA_MB = 256
CPU_S_PER_INPUT = 2.0


def copy_by_copy_wrap(end, kv, period):
    """The wrap as it was before issue 11.4: one array per wrap of the longest request."""
    import math

    ends, kvs = [], []
    for j in range(1, math.ceil(float(end.max()) / period) + 1):
        e = end - j * period
        alive = e > 0
        ends.append(e[alive])
        kvs.append(kv[alive])
    w_end = np.concatenate(ends) if ends else np.empty(0)
    w_kv = np.concatenate(kvs) if kvs else np.empty(0)
    return 0.0, 0, w_end, w_kv


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cases() -> list[tuple[str, SizingInput]]:
    top = RANGES["arrival_rate_rps"].high
    longest = LengthQuantiles(mean=MAX_TOKENS, p50=MAX_TOKENS, p95=MAX_TOKENS, p99=MAX_TOKENS)
    # A model whose context holds the longest request, so nothing is capped away.
    wide = ModelSpec("wide", kv_bytes_per_token=1000, context_length=2 * MAX_TOKENS, weights_gb=10, r_wt_per_s=1000)
    rng = np.random.default_rng(0)
    n_trace = 1_000_000
    return [
        ("highest rate", make_input(arrival_rate_rps=top)),
        ("lowest positive rate", make_input(arrival_rate_rps=RANGES["arrival_rate_rps"].low)),
        (
            "highest rate, longest requests, slowest decode",
            make_input(model=wide, arrival_rate_rps=top, prompt_tokens=longest, output_tokens=longest),
        ),
        ("largest simulation", make_input(arrival_rate_rps=top, sim_requests=MAX_SIM_REQUESTS)),
        (
            "a million samples",
            make_input(
                arrival_rate_rps=top,
                prompt_tokens=LengthSamples(rng.integers(0, MAX_TOKENS, 1_000_000)),
                output_tokens=LengthSamples(rng.integers(0, 100_000, 1_000_000)),
                sim_requests=MAX_SIM_REQUESTS,
            ),
        ),
        (
            "a million-request trace at the highest rate",
            make_input(
                arrival_rate_rps=top,
                arrival_times_s=np.sort(rng.uniform(0, 3600, n_trace)),
                prompt_tokens=LengthSamples(rng.integers(1, 50_000, n_trace)),
                output_tokens=LengthSamples(rng.integers(1, 5_000, n_trace)),
            ),
        ),
        ("every fraction at its top", make_input(arrival_rate_rps=top, cache_hit_ratio=1, cancellation_ratio=1)),
        (
            "every multiplier at its top",
            replace(
                make_input(arrival_rate_rps=top),
                lb_unevenness=RANGES["lb_unevenness"].high,
                utilization_target=RANGES["utilization_target"].low,
                startup_minutes=RANGES["startup_minutes"].high,
                ramp_rps_per_minute=RANGES["ramp_rps_per_minute"].high,
                failure_policy="replica:10000",
                zones=64,
            ),
        ),
    ]


def main() -> None:
    if os.environ.get("HEADROOM_TEST_OLD_WRAP") == "1":
        kvsim._wrapped = copy_by_copy_wrap
    all_cases = cases()  # built before the limits: the test inputs themselves are not the work measured
    size(make_input())  # warm numpy's lazy imports
    extra_mb = int(sys.argv[1]) if len(sys.argv) > 1 else EXTRA_MB
    resource.setrlimit(resource.RLIMIT_AS, (_vm_bytes() + extra_mb * 1024 * 1024, resource.RLIM_INFINITY))
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = used.ru_utime + used.ru_stime
    budget = int(cpu0 + CPU_S_PER_INPUT * len(all_cases)) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (budget, budget + 1))
    rss0 = _peak_rss_bytes()
    for name, inp in all_cases:
        u0 = resource.getrusage(resource.RUSAGE_SELF)
        w0 = time.perf_counter()
        r = size(inp)
        u1 = resource.getrusage(resource.RUSAGE_SELF)
        row = {
            "case": name,
            "cpu_s": (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime),
            "wall_s": time.perf_counter() - w0,
            "peak_extra_mb": (_peak_rss_bytes() - rss0) / 1e6,
            "kv_tokens_p99": r.kv_tokens_p99,
            "replicas": r.replicas.total,
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
