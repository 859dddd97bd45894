"""A fleet that moves on its own: replays a real trace through the admission API.

Requests from the Azure conversation trace are time-scaled so the offered load is a chosen
fraction of what the active entitlements allow, spread over entitlements in proportion to
their rate. Admitted requests complete after TTFT + output × TPOT (scaled the same way) with the
trace's real output length; every `sample_every_s` each pool reports a fleet sample. An optional
spike multiplies arrivals for a few minutes; an optional zone failure takes the largest zone of
every pool out at a chosen minute.
"""

from __future__ import annotations

import heapq
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from admission.client import AdmissionClient
from admission.isotime import iso_utc
from capacity.traces import Trace

# The gateway client's own default (a quarter second) suits a gateway's hot path; the simulator's
# one dev server under `make run` can take longer while it also renders pages.
TIMEOUT_S = 5.0


@dataclass
class SimConfig:
    base_url: str
    token: str
    load: float = 0.8
    spike_at_minute: float | None = None
    spike_factor: float = 3.0
    spike_minutes: float = 3.0
    zone_failure_at_minute: float | None = None
    sample_every_s: float = 10.0
    minutes: float | None = None
    workers: int = 8
    max_rps: float = 25.0
    seed: int = 7


@dataclass
class PoolState:
    slug: str
    zones: list[int]
    rate_wt_per_s: float
    in_flight: int = 0
    in_flight_wt: float = 0.0
    failed: bool = False


@dataclass
class Stats:
    sent: int = 0
    admitted: int = 0
    by_source: dict[str, int] = field(default_factory=dict)  # admissions by answer source (docs/spillover.md)
    throttled: dict[str, int] = field(default_factory=dict)
    completed: int = 0
    samples: int = 0
    errors: int = 0


def _key(e: dict[str, Any]) -> tuple[str, str | None, str, str]:
    return (e["tenant"], e.get("project") or None, e["pool"], e["traffic_class"])


class FleetSimulator:
    def __init__(
        self,
        cfg: SimConfig,
        trace: Trace,
        entitlements: list[dict[str, Any]],
        pools: list[PoolState],
        ops: dict[str, tuple[float, float]],
        overdrive: dict[tuple[str, str | None, str, str], float] | None = None,
    ) -> None:
        overdrive = overdrive or {}
        self.cfg = cfg
        self.trace = trace
        self.ents = [e for e in entitlements if e["rate_wt_per_s"] > 0]
        self.pools = {p.slug: p for p in pools}
        self.ops = ops  # pool slug → (ttft_s, tpot_s)
        self.client = AdmissionClient(cfg.base_url, cfg.token, timeout_s=TIMEOUT_S)
        self.stats = Stats()
        self.lock = threading.Lock()
        self.rng = random.Random(cfg.seed)
        self.completions: list[tuple[float, int, dict[str, Any], str, float]] = []
        self.seq = 0
        w = [e["w_out"] for e in self.ents]
        mean_w_out = float(np.mean(w)) if w else 4.0
        duration = max(1.0, float(trace.arrival_s[-1] - trace.arrival_s[0]))
        wt = trace.prompt.astype(float) + mean_w_out * trace.output.astype(float)
        trace_rps = len(trace) / duration
        # The clock runs `speed` times faster than the trace, capped at what one dev server answers.
        self.speed = max(0.05, cfg.max_rps / trace_rps)
        offered_wt_per_s = float(wt.sum()) / duration * self.speed
        # Overdriven entitlements are offered that multiple of their own rate first, so the demo spills and
        # borrows; the rest of the load aims at the smallest others until they add up to the remainder ÷
        # load, so those run near the chosen load and quotas, borrowing and reclaim actually happen.
        driven = [(e, overdrive[_key(e)] * e["rate_wt_per_s"]) for e in self.ents if overdrive.get(_key(e), 0) > 0]
        rest_wt_per_s = max(0.0, offered_wt_per_s - sum(wt for _, wt in driven))
        chosen: list[dict[str, Any]] = []
        for e in sorted(self.ents, key=lambda e: e["rate_wt_per_s"]):
            if rest_wt_per_s <= 0 or overdrive.get(_key(e), 0) > 0:
                continue
            chosen.append(e)
            if sum(c["rate_wt_per_s"] for c in chosen) >= rest_wt_per_s / max(cfg.load, 1e-6):
                break
        chosen_rate = sum(c["rate_wt_per_s"] for c in chosen)
        # Picking weights are each entitlement's offered wt/s (only their ratios matter).
        self.ents = [e for e, _ in driven] + chosen
        self.weights = [wt for _, wt in driven] + [rest_wt_per_s * c["rate_wt_per_s"] / chosen_rate for c in chosen]
        self.offered_fraction = offered_wt_per_s / max(1.0, sum(e["rate_wt_per_s"] for e in self.ents))

    def _pick(self) -> dict[str, Any]:
        return self.rng.choices(self.ents, weights=self.weights, k=1)[0]

    def _reserve(self, i: int, sim_t: float) -> None:
        ent = self._pick()
        prompt, output = int(self.trace.prompt[i]), int(self.trace.output[i])
        request_id = f"sim-{int(time.time() * 1000)}-{i}-{self.rng.randrange(1 << 30)}"
        d = self.client.reserve(
            request_id=request_id,
            tenant=ent["tenant"],
            model=ent["model"],
            region=ent["region"],
            traffic_class=ent["traffic_class"],
            prompt_tokens=prompt,
            max_output_tokens=min(ent["envelope"]["max_output_tokens"], max(output, ent["envelope"]["output_p95"])),
            project=ent.get("project") or None,
        )
        with self.lock:
            # The client's local fail mode (portal unreachable) and a 400 are not answers the portal
            # recorded: errors, not admissions or throttles.
            if d.get("source") == "fail_open" or d.get("decision") not in ("admit", "throttle"):
                self.stats.errors += 1
                return
            self.stats.sent += 1
            if d["decision"] == "admit":
                self.stats.admitted += 1
                src = d.get("source", "?")
                self.stats.by_source[src] = self.stats.by_source.get(src, 0) + 1
                pool = self.pools.get(ent["pool"])
                ttft, tpot = self.ops.get(ent["pool"], (0.5, 0.05))
                e2e = ttft + output * tpot
                if pool:
                    pool.in_flight += 1
                    pool.in_flight_wt += d.get("reserved_wt") or 0.0
                due = time.monotonic() + e2e / self.speed
                done = {
                    "reservation_id": d["reservation_id"],
                    "prompt_tokens": prompt,
                    "output_tokens": output,
                    "status": "ok",
                    "ttft_ms": round(ttft * 1000),
                    "e2e_ms": round(e2e * 1000),
                }
                self.seq += 1
                heapq.heappush(self.completions, (due, self.seq, done, ent["pool"], d.get("reserved_wt") or 0.0))
            else:
                reason = d.get("reason", "?")
                self.stats.throttled[reason] = self.stats.throttled.get(reason, 0) + 1

    def _complete(self, done: dict[str, Any], pool_slug: str, wt: float) -> None:
        settled = self.client.complete(done.pop("reservation_id"), **done)
        with self.lock:
            if settled is None:
                self.stats.errors += 1
            else:
                self.stats.completed += 1
            pool = self.pools.get(pool_slug)
            if pool:
                pool.in_flight = max(0, pool.in_flight - 1)
                pool.in_flight_wt = max(0.0, pool.in_flight_wt - wt)

    def _samples(self, sim_minute: float) -> None:
        now = time.time()
        for pool in self.pools.values():
            if self.cfg.zone_failure_at_minute is not None and sim_minute >= self.cfg.zone_failure_at_minute:
                pool.failed = True
            total = sum(pool.zones)
            healthy = total - (max(pool.zones) if pool.failed and pool.zones else 0)
            # Busy share of the pool: in-flight work against what the healthy replicas can hold.
            util = min(1.0, pool.in_flight / max(1.0, 16.0 * max(1, healthy)))
            body = {
                "pool": pool.slug,
                "ts": iso_utc(now),
                "replicas_healthy": healthy,
                "replicas_total": total,
                "accelerator_util": round(0.05 + 0.9 * util, 4),
                "kv_cache_usage": round(min(1.0, 0.02 + 0.9 * util), 4),
                "requests_running": pool.in_flight,
                "requests_waiting": 0,
            }
            delivered = self.client.fleet_sample(body)
            with self.lock:
                if delivered:
                    self.stats.samples += 1
                else:
                    self.stats.errors += 1

    def run(self, stop: threading.Event, log: Any = print) -> Stats:
        arr = self.trace.arrival_s - self.trace.arrival_s[0]
        t0 = time.monotonic()
        next_sample = 0.0
        next_log = 30.0
        i = 0
        offset = 0.0
        with ThreadPoolExecutor(self.cfg.workers) as pool:
            while not stop.is_set():
                wall = time.monotonic() - t0
                sim_t = wall * self.speed
                sim_minute = sim_t / 60.0
                if self.cfg.minutes is not None and sim_minute >= self.cfg.minutes:
                    break
                while i < len(arr) and arr[i] + offset <= sim_t:
                    copies = 1
                    sp = self.cfg.spike_at_minute
                    if sp is not None and sp <= sim_minute < sp + self.cfg.spike_minutes:
                        copies = int(self.cfg.spike_factor) + (self.rng.random() < self.cfg.spike_factor % 1)
                    for _ in range(copies):
                        pool.submit(self._reserve, i, sim_t)
                    i += 1
                if i >= len(arr):  # loop the trace
                    offset += float(arr[-1]) + 1.0
                    i = 0
                now = time.monotonic()
                while self.completions and self.completions[0][0] <= now:
                    _, _, done, slug, wt = heapq.heappop(self.completions)
                    pool.submit(self._complete, done, slug, wt)
                if wall >= next_sample:
                    pool.submit(self._samples, sim_minute)
                    next_sample = wall + self.cfg.sample_every_s
                if wall >= next_log:
                    s = self.stats
                    log(
                        f"[simulate_fleet] t={sim_minute:6.1f} trace-min sent={s.sent} admitted={s.admitted} "
                        f"throttled={dict(sorted(s.throttled.items()))} errors={s.errors}"
                    )
                    next_log = wall + 30.0
                stop.wait(0.01)
        return self.stats
