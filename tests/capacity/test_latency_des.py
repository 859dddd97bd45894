"""An independent discrete-event simulation of continuous batching with chunked prefill, built from the
catalogue's operating points with its own code (not capacity/batching_sim.py, not the curve's law),
against the sizing answer's breaking rate (issue 46): within 20 % on at least 80 % of the cases
(a trace and two envelopes on five model / accelerator pairs of data/operating_points.csv).

The reference, per replica: requests dealt round-robin over N replicas; each step decodes one token
for every decoding sequence and prefills up to CHUNK prompt tokens of the admitted requests in arrival
order; a step lasts `a + b × decoding sequences + prefill tokens ÷ bound`, the bound being the replica's
prefill compute bound (accelerators × dense FLOP/s × 0.5 ÷ (2 × active parameters)). `a` and `b` come
from the Server and Interactive points: at each, the batch is throughput × TPOT and the step less its
prefill share (throughput × prompt ÷ output ÷ bound) is `a + b × batch`. Admission stops at the KV
memory or at the batch the Offline point's throughput implies. Its breaking rate is a bisection on
the rate (the same requests, squeezed) for the p99s against the SLO.

The reference must carry the points it is built from: on MI300X, the one pair whose measured prompt
load fits under the prefill bound (65 % of it at Server), its TTFT p99 at the Server point's rate is
within 1.5× of the measured. With 512-token chunks it was 28 s against 1.9 s measured (a step of at
least 27 ms prefills at most ~19,000 tokens/s, under the point's 24,600): that throttle, not the
product, made MI300X look 2.5× optimistic. CHUNK is 2,048, vLLM's default token budget for an online
server (the MI300X points are vLLM's).

Measured (docs/latency.md): 15 of 15 cases within 20 % (0.81–1.02×); the lowest are 405B on B200
(0.81–0.92×; TPOT breaks first on two of the three): the product's decode step is fitted through the points'
p99 TPOT with prefill taken out at the bound, the reference clips that remainder at 5 %.
"""

from __future__ import annotations

import csv
import heapq
from collections import deque
from pathlib import Path

import numpy as np
import pytest

from capacity.cost import CloudAccelerator
from capacity.latency_curve import fit_pairs
from capacity.latency_report import latency_report
from capacity.latency_validation import pairs_from_rows
from capacity.sizing import AcceleratorSpec, LengthSamples, ModelSpec, OperatingPoint, SizingInput, Slo, size
from capacity.traces import parse_trace
from capacity.units import ReferenceMix

ROOT = Path(__file__).resolve().parents[2]
CHUNK = 2048  # prompt tokens prefilled per step (vLLM's online default max_num_batched_tokens)
REQUESTS = 2_000  # per simulated replica
MFU = 0.5

# (pair key prefix in data/operating_points.csv, model: params B, weights GB, KV bytes/token, context,
#  reference mix (demo/loaders.py MLPERF_MIXES), accelerator memory GB, dense BF16 TFLOP/s, SLO)
PAIRS = {
    "llama2-70b-99 on 8× NVIDIA B200": (69.0, 140, 327_680, 4096, (300, 300), 180, 2250, Slo(2.0, 0.2)),
    "llama2-70b-99 on 8× NVIDIA H200": (69.0, 140, 327_680, 4096, (300, 300), 141, 989, Slo(2.0, 0.2)),
    "llama2-70b-99 on 8× AMD Instinct MI300X 192GB": (69.0, 140, 327_680, 4096, (300, 300), 192, 1307, Slo(2.0, 0.2)),
    "llama3.1-8b on 8× NVIDIA H200": (8.0, 16, 131_072, 8192, (800, 70), 141, 989, Slo(0.5, 0.1)),
    "llama3.1-405b on 8× NVIDIA B200": (405.0, 810, 516_096, 16384, (9400, 680), 180, 2250, Slo(6.0, 0.2)),
}


def _pairs():
    with open(ROOT / "data" / "operating_points.csv", newline="", encoding="utf-8") as fh:
        return pairs_from_rows(csv.DictReader(fh))


def _points(key_prefix: str):
    pairs = _pairs()
    key = next(k for k in pairs if k.startswith(key_prefix))
    pts = {p.label.split(" ")[0]: p for p in pairs[key][1]}
    return key, pts


def _workloads():
    trace = parse_trace((ROOT / "data" / "azure_llm_2023_conv.csv").read_bytes())
    t = trace.arrival_s[:3000]
    yield "trace", t - t[0], trace.prompt[:3000].astype(float), trace.output[:3000].astype(float)
    for name, seed, (pm, om) in (("envelope short", 1, (500, 200)), ("envelope long", 2, (1500, 100))):
        rng = np.random.default_rng(seed)
        n = 3000
        p = np.clip(np.round(rng.lognormal(np.log(pm), 0.8, n)), 1, 3500)
        o = np.clip(np.round(rng.lognormal(np.log(om), 0.6, n)), 1, 500)
        yield name, None, p, o


def _reference_law(spec, pts):
    """(a, b, bound, max_batch, kv_budget) of the reference's step, from the pair's three points."""
    params, weights, kv_bytes, _, (mp, mo), mem, tflops, _ = spec
    bound = 8 * tflops * 1e12 * MFU / (2 * params * 1e9)
    server, inter, offline = pts["Server"], pts["Interactive"], pts["Offline"]
    share = mp / mo / bound

    def decode_part(x, tpot):
        return x * tpot, tpot * max(1 - x * share, 0.05)

    (b1, d1), (b2, d2) = decode_part(server.out_tps, server.tpot_p99_s), decode_part(inter.out_tps, inter.tpot_p99_s)
    b = max((d1 - d2) / (b1 - b2), 0.0)
    a = max(d1 - b * b1, 1e-4)
    free = 1 - offline.out_tps * share
    denom = free - offline.out_tps * b
    max_batch = int(offline.out_tps * a / denom) if denom > 0 else 4096
    kv_budget = (8 * mem - weights) * 1e9 / kv_bytes
    return {"a": a, "b": b, "bound": bound, "max_batch": max(max_batch, 1), "kv_budget": kv_budget}


def _reference_breaking(times, prompt, output, replicas, rate, spec, pts, slo):
    """The reference simulation's breaking rate (req/s) for `replicas` at the given requests."""
    law = _reference_law(spec, pts)
    mine = np.arange(0, len(prompt), replicas)[:REQUESTS]
    base_t = times[mine] if times is not None else None
    p, o = prompt[mine], output[mine]

    def p99s(factor):
        if base_t is None:
            gaps = np.random.default_rng(7).exponential(replicas / (rate * factor), len(mine))
            arr = np.cumsum(gaps)
        else:
            arr = base_t / factor
        return _des(arr, p, o, **law)

    def ok(f):
        ttft, tpot = p99s(f)
        return ttft <= slo.ttft_p99_s and tpot <= slo.tpot_p99_s

    lo, hi = 1 / 64, 64.0
    if not ok(lo):
        return 0.0
    for _ in range(14):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo * rate


def _des(arr, prompt, output, *, a, b, bound, max_batch, kv_budget):
    n = len(arr)
    waiting: deque[int] = deque()
    prefilling: deque[list[float]] = deque()  # [request, prompt tokens left]
    decoding: list[tuple[int, int]] = []  # (step of the last token, request)
    first, last = np.zeros(n), np.zeros(n)
    t, step, nxt, kv = 0.0, 0, 0, 0.0
    while nxt < n or waiting or prefilling or decoding:
        while nxt < n and arr[nxt] <= t:
            waiting.append(nxt)
            nxt += 1
        if not (waiting or prefilling or decoding):
            t = arr[nxt]
            continue
        while waiting and len(prefilling) + len(decoding) < max_batch:
            r = waiting[0]
            need = prompt[r] + output[r]
            if kv + need > kv_budget and (prefilling or decoding):
                break
            waiting.popleft()
            kv += need
            prefilling.append([r, prompt[r]])
        budget, done = CHUNK, []
        for item in prefilling:
            take = min(item[1], budget)
            item[1] -= take
            budget -= take
            if item[1] <= 0:
                done.append(item[0])
            if budget <= 0:
                break
        t += a + b * len(decoding) + (CHUNK - budget) / bound
        step += 1
        for r in done:
            prefilling.popleft()
            first[r] = t
            heapq.heappush(decoding, (step + int(output[r]) - 1, r))
        while decoding and decoding[0][0] <= step:
            _, r = heapq.heappop(decoding)
            last[r] = t
            kv -= prompt[r] + output[r]
    skip = n // 10
    ttft = first[skip:] - arr[skip:]
    out = output[skip:]
    tpot = np.where(out > 1, (last[skip:] - first[skip:]) / np.maximum(out - 1, 1), 0.0)
    return float(np.percentile(ttft, 99)), float(np.percentile(tpot, 99))


def _product(key, spec, pts, times, prompt, output, rate):
    params, weights, kv_bytes, ctx, (mp, mo), mem, tflops, slo = spec
    model = ModelSpec("m", kv_bytes, ctx, weights, 1000, active_params_b=params)
    acc = AcceleratorSpec("acc", memory_gb=mem, cost=CloudAccelerator(on_demand_per_hour=3.0), dense_tflops=tflops)
    s = pts["Server"]
    point = OperatingPoint(
        "Server", "acc", 8, s.out_tps, ReferenceMix(mp, mo), slo.ttft_p99_s, slo.tpot_p99_s, s.ttft_p99_s, s.tpot_p99_s
    )
    inp = SizingInput(
        model=model,
        operating_points=(point,),
        accelerators=(acc,),
        arrival_rate_rps=rate,
        prompt_tokens=LengthSamples(prompt.astype(np.int64)),
        output_tokens=LengthSamples(output.astype(np.int64)),
        arrival_times_s=times,
        slo=slo,
        lb_unevenness=1.0,
        failure_policy="none",
    )
    result = size(inp, fleet_only=True)
    curve = fit_pairs(_pairs())[key]
    report = latency_report(inp, result, curve)
    return report["slo_breaking_rate_rps"], result.replicas.steady, report


@pytest.mark.slow
def test_the_breaking_rate_agrees_with_an_independent_simulation_on_most_cases():
    rows = []
    for prefix, spec in PAIRS.items():
        key, pts = _points(prefix)
        for name, times, prompt, output in _workloads():
            rate = len(times) / float(times[-1]) if times is not None else 2.0
            got, n, report = _product(key, spec, pts, times, prompt, output, rate)
            ref = _reference_breaking(times, prompt, output, n, rate, spec, pts, spec[-1])
            rows.append((prefix, name, n, got, ref))
            # The answer's own simulation never misses the SLO below its stated breaking rate.
            for s in report["latency_under_load"]["series"]["sim"]:
                assert s["meets_slo"] or s["rate_rps"] > got
    within = [r for r in rows if r[4] > 0 and abs(r[3] / r[4] - 1) <= 0.2]
    table = "\n".join(f"{p} / {w}: N={n} product {g:.2f} reference {r:.2f} req/s" for p, w, n, g, r in rows)
    assert len(within) >= 0.8 * len(rows), table
    assert all(r[4] > 0 and 2 / 3 <= r[3] / r[4] <= 1.5 for r in rows), table


def test_the_reference_carries_the_points_it_is_built_from():
    """On the pair whose measured prompt load fits under the prefill bound (MI300X 70B), the reference
    at the Server point's rate, on the reference mix (300 in / 300 out, lognormal), meets the measured
    TTFT p99 within 1.5× and stays under the measured TPOT p99 (a p99, the sum of its worst steps)."""
    spec = PAIRS["llama2-70b-99 on 8× AMD Instinct MI300X 192GB"]
    _, pts = _points("llama2-70b-99 on 8× AMD Instinct MI300X 192GB")
    law = _reference_law(spec, pts)
    server = pts["Server"]
    rng = np.random.default_rng(3)
    p = np.maximum(1, np.round(rng.lognormal(np.log(300) - 0.125, 0.5, REQUESTS)))
    o = np.maximum(2, np.round(rng.lognormal(np.log(300) - 0.125, 0.5, REQUESTS)))
    arrivals = np.cumsum(rng.exponential(300 / server.out_tps, REQUESTS))
    ttft, tpot = _des(arrivals, p, o, **law)
    assert server.ttft_p99_s / 1.5 <= ttft <= 1.5 * server.ttft_p99_s, (ttft, server.ttft_p99_s)
    assert tpot <= server.tpot_p99_s, (tpot, server.tpot_p99_s)
