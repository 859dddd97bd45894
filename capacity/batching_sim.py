"""Request-level simulation of continuous batching on N replicas, with the serving curve's step times.

The rule, pinned so anyone can re-implement it (docs/latency.md, "The simulation"):

1. Requests (arrival time, prompt work in weighted tokens, output tokens, KV tokens) are dealt to the
   N replicas round-robin in arrival order. Replicas are then exchangeable, so one is simulated: the
   requests i ≡ 0 (mod N), with its arrival times divided by `lb_unevenness` (the busiest replica sees
   that much more than the average).
2. Iteration-level scheduling on that replica. At each step boundary, waiting requests that have
   arrived are admitted first come first served while the batch holds fewer than `max_batch`
   sequences (decoding and prefilling) and their KV (prompt + output) fits the replica's KV budget (the
   head of the line blocks the rest; a request larger than the whole budget runs alone). Admitted
   requests prefill in arrival order, at most `chunk` prefill work a step (chunked prefill). A step
   takes `a + k_prefill × prefill work done in it + k × w_out × sequences decoding` seconds
   (capacity.latency_fleet.Fleet.step_law: prefill at no more than the replica's compute bound,
   decode with what the measured points leave): prefill interrupts decoding, so TPOT rises with the
   prompt load. A request's first token ends the step that finishes its prefill; it then decodes one
   token per step and leaves after `output − 1` more, freeing its KV.
3. TTFT = the law's floor + (end of the step that finishes its prefill − arrival); TPOT = (last token − first) ÷
   (output − 1), 0 for a one-token answer. The first `WARMUP_SHARE` of the replica's requests warm an
   empty replica up and are not counted.

Bounded work: at most `MAX_SIM_REQUESTS` requests of the simulated replica; past that, the window of
that many consecutive requests with the shortest span (the densest stretch) is simulated and `sampled`
says so. The window depends only on the order of the arrivals, not on their scale, so the same requests
are simulated at every rate (common random numbers: a faster rate only squeezes the same arrivals).
Steps between events (an arrival, a completion, a prefill finishing) are identical and are advanced
together, so the work is O(requests × log batch), not O(steps).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MAX_SIM_REQUESTS = 2_000
WARMUP_SHARE = 0.1


@dataclass(frozen=True)
class StepLaw:
    """Per replica: step floor `a_s`, seconds per weighted token of work `k_s`, the batch cap, the KV
    budget (tokens), the TTFT floor, the output-token weight, and seconds per weighted prefill token
    `k_prefill_s` (None: `k_s`, the same rate as decode's weighted tokens)."""

    a_s: float
    k_s: float
    max_batch: int
    kv_budget: float
    ttft_floor_s: float
    w_out: float
    k_prefill_s: float | None = None
    # Prefill work per step (chunked prefill); None: a step prefills everything admitted at it.
    chunk: float | None = None

    @property
    def prefill_s_per_wt(self) -> float:
        return self.k_s if self.k_prefill_s is None else self.k_prefill_s


@dataclass(frozen=True)
class SimResult:
    requests: int
    counted: int
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    attainment: float
    sampled: bool
    note: str

    def latency(self) -> dict[str, float]:
        return {
            "ttft_p50_s": self.ttft_p50_s,
            "ttft_p99_s": self.ttft_p99_s,
            "tpot_p50_s": self.tpot_p50_s,
            "tpot_p99_s": self.tpot_p99_s,
        }


def replica_share(
    arrival_s: FloatArray, replicas: int, lb_unevenness: float
) -> tuple[npt.NDArray[np.intp], FloatArray]:
    """Indices (into the arrival-sorted requests) and arrival times of the simulated replica (rule 1)."""
    order = np.argsort(arrival_s, kind="stable")
    mine = order[::replicas]
    return mine, arrival_s[mine] / lb_unevenness


def _window(times: FloatArray) -> tuple[int, int]:
    """The MAX_SIM_REQUESTS consecutive requests with the shortest span: invariant under scaling the
    times, so every rate simulates the same requests (the first such window on a tie)."""
    n = len(times)
    if n <= MAX_SIM_REQUESTS:
        return 0, n
    spans = times[MAX_SIM_REQUESTS - 1 :] - times[: n - MAX_SIM_REQUESTS + 1]
    start = int(np.argmin(spans))
    return start, start + MAX_SIM_REQUESTS


def simulate(
    *,
    arrival_s: FloatArray,
    prefill_wt: FloatArray,
    output_tokens: FloatArray,
    kv_tokens: FloatArray,
    replicas: int,
    lb_unevenness: float,
    law: StepLaw,
    ttft_slo_s: float,
    tpot_slo_s: float,
) -> SimResult:
    """Simulate one replica of `replicas` (rules 1–3) and return its percentiles and SLO attainment."""
    mine, times = replica_share(np.asarray(arrival_s, dtype=np.float64), replicas, lb_unevenness)
    lo, hi = _window(times)
    sampled = hi - lo < len(times)
    idx = mine[lo:hi]
    t_arr = times[lo:hi]
    ttft, tpot = _run(t_arr, prefill_wt[idx], output_tokens[idx], kv_tokens[idx], law)
    skip = int(len(t_arr) * WARMUP_SHARE)
    ttft, tpot = ttft[skip:], tpot[skip:]
    n = len(t_arr)
    note = (
        f"simulated one of {replicas} replicas: {n:,} of its {len(times):,} requests"
        + (f" (its densest stretch; past {MAX_SIM_REQUESTS:,} the simulation samples)" if sampled else "")
        + f", the first {skip:,} as warm-up"
    )
    if len(ttft) == 0:
        return SimResult(n, 0, law.ttft_floor_s, law.ttft_floor_s, 0.0, 0.0, 1.0, sampled, note)
    ok = (ttft <= ttft_slo_s) & (tpot <= tpot_slo_s)
    return SimResult(
        requests=n,
        counted=len(ttft),
        ttft_p50_s=float(np.percentile(ttft, 50)),
        ttft_p99_s=float(np.percentile(ttft, 99)),
        tpot_p50_s=float(np.percentile(tpot, 50)),
        tpot_p99_s=float(np.percentile(tpot, 99)),
        attainment=float(ok.mean()),
        sampled=sampled,
        note=note,
    )


def _run(
    t_arr: FloatArray, prefill: FloatArray, out: FloatArray, kv: FloatArray, law: StepLaw
) -> tuple[FloatArray, FloatArray]:
    n = len(t_arr)
    arrivals = t_arr.tolist()
    arrivals.append(math.inf)  # a sentinel: no arrival after the last
    pre, kvs = prefill.tolist(), kv.tolist()
    outs = np.maximum(out, 1).astype(np.int64).tolist()
    first = [0.0] * n
    last = [0.0] * n
    # Decoding requests as one int each, finish step × n + request: a heap of ints, no tuples.
    running: list[int] = []
    queue: deque[int] = deque()  # admitted, prefilling in arrival order
    left = 0.0  # prefill work left of the queue's head
    t, g, nxt, kv_used = 0.0, 0, 0, 0.0
    decode_cost = law.k_s * law.w_out
    prefill_cost = law.prefill_s_per_wt
    chunk = law.chunk if law.chunk else math.inf
    cap, budget, a = law.max_batch, law.kv_budget, law.a_s
    push, pop, ceil = heapq.heappush, heapq.heappop, math.ceil
    while nxt < n or running or queue:
        if not running and not queue and arrivals[nxt] > t:
            t = arrivals[nxt]
        while arrivals[nxt] <= t and len(running) + len(queue) < cap:
            need = kvs[nxt]
            if kv_used + need > budget and (running or queue):
                break
            kv_used += need
            if not queue:
                left = pre[nxt]
            queue.append(nxt)
            nxt += 1
        if queue:
            steps = 1
            if left > chunk:
                # Steps that spend the whole chunk on the head are alike: advance them together, up to
                # the next decode completion (admissions between them only queue behind the head).
                steps = ceil(left / chunk) - 1
                if running:
                    steps = min(steps, running[0] // n - g)
                t += steps * (a + prefill_cost * chunk + decode_cost * len(running))
                g += steps
                left -= steps * chunk
            else:
                # One step: the chunk goes to the prefilling requests in arrival order; those it
                # completes get their first token at its end and decode from the next step.
                room, work = chunk, 0.0
                done = []
                while queue and left <= room:
                    room -= left
                    work += left
                    done.append(queue.popleft())
                    left = pre[queue[0]] if queue else 0.0
                if queue:
                    left -= room
                    work += room
                t += a + prefill_cost * work + decode_cost * len(running)
                g += 1
                for r in done:
                    first[r] = t
                    push(running, (g + outs[r] - 1) * n + r)
        elif running:
            s = a + decode_cost * len(running)
            steps = running[0] // n - g
            if nxt < n and len(running) < cap:
                steps = min(steps, max(1, ceil((arrivals[nxt] - t) / s)))
            t += steps * s
            g += steps
        else:
            continue
        # Completions at this step boundary free their KV.
        end = (g + 1) * n
        while running and running[0] < end:
            r = pop(running) % n
            last[r] = t
            kv_used -= kvs[r]
    ttft = np.asarray(first) - t_arr + law.ttft_floor_s
    o = np.asarray(outs, dtype=np.float64)
    tpot = np.where(o > 1, (np.asarray(last) - np.asarray(first)) / np.maximum(o - 1, 1), 0.0)
    return ttft, tpot
