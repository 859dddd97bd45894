"""Issue 20's goals, measured (run from bench/admission.py, which starts gunicorn and the database):

1. Library mode vs HTTP mode: reserve + complete pairs/s, the same `clients` threads in this
   process either calling admission.library.Library (same scripts, in-process) or
   admission.client.AdmissionClient against gunicorn, in alternating short rounds with the order
   swapped so a change in the machine's load hits both alike; CPU per pair: this (gateway) process's
   plus, in HTTP mode, the gunicorn workers' (/proc). Goal: library ≥ 5 × HTTP.
2. Redis Cluster (BENCH_REDIS_CLUSTER_URL, e.g. redis+cluster://127.0.0.1:7101; skipped without
   it): reserve + complete pairs/s of forked worker processes on two pools whose hash tags live on
   two different nodes vs on one pool (one node), alternating rounds. Goal: two nodes ≥ 1.6 × one.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import threading
import time
import uuid
from typing import Any


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def count_dead_letter(batch: list[dict], error: str) -> None:
    """The benches' library dead letter: the batch is counted, not logged whole (a bench's events
    are not kept; the default logs every event as JSON)."""
    DEAD[0] += len(batch)


DEAD = [0]


def worker_cpu(master_pid: int) -> Any:
    """A function → CPU seconds (user + system) the gunicorn master's worker processes used so far."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        total = 0.0
        for task in os.listdir(f"/proc/{master_pid}/task"):
            with open(f"/proc/{master_pid}/task/{task}/children") as fh:
                kids = fh.read().split()
            for pid in kids:
                try:
                    with open(f"/proc/{pid}/stat") as fh:
                        fields = fh.read().rsplit(")", 1)[1].split()
                except FileNotFoundError:
                    continue
                total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        return total

    return cpu


def _pairs(make_call: Any, clients: int, seconds: float) -> int:
    """`clients` threads doing reserve + complete for `seconds`; → pairs completed."""
    done = [0] * clients
    stop = time.monotonic() + seconds

    def run(k: int) -> None:
        call = make_call(k)
        i = 0
        while time.monotonic() < stop:
            call(i)
            i += 1
        done[k] = i

    ts = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return sum(done)


def body(tag: str, k: int, i: int) -> dict:
    return {"request_id": f"{tag}-{k}-{i}-{uuid.uuid4().hex[:6]}", "tenant": "acme", "model": "llama-test",
            "region": "us-test", "traffic_class": "reserved", "prompt_tokens": 20, "max_output_tokens": 20}  # fmt: skip


def report(m: dict) -> None:
    print(f"  library ÷ HTTP mode reserve+complete, per round {m['ratio']:6.2f}   (≥ 5; rounds "
          f"{', '.join(f'{x:.2f}' for x in m['rounds'])}; ratio of totals {m['ratio_totals']:.2f})")  # fmt: skip
    print(f"  CPU per pair: HTTP mode {m['http_cpu_ms']:.2f} ms (workers {m['http_worker_cpu_ms']:.2f} + gateway "
          f"{m['http_cpu_ms'] - m['http_worker_cpu_ms']:.2f}), library mode {m['library_cpu_ms']:.2f} ms")  # fmt: skip


def alone(port: int, token: str, redis_url: str, args: Any, gunicorn_pid: int) -> int:
    """bench/admission.py --modes-only: this part without parts 1 and 2."""
    print(f"3. library mode vs HTTP mode (reserve + complete); {load()}")
    report(modes(port, token, redis_url, clients=args.clients, rounds=args.rounds, round_s=args.round_s,
                 workers=worker_cpu(gunicorn_pid)))  # fmt: skip
    print(f"  ({load()})")
    return 0


def modes(
    port: int, token: str, redis_url: str, *, clients: int, rounds: int, round_s: float, workers: Any = None
) -> dict[str, float]:
    """`workers`: worker_cpu(gunicorn's pid), for the HTTP mode's server CPU per pair."""
    from admission.client import AdmissionClient
    from admission.library import Library

    url = f"http://127.0.0.1:{port}"
    http = AdmissionClient(url, token, timeout_s=10)
    lib = Library(url, token, signing_key="bench-signing-key", redis_url=redis_url, prefix=f"benchlib-{uuid.uuid4().hex[:6]}:",
                  redis_timeout_s=1.0, sweep_every_s=None, event_flush_s=1.0, dead_letter=count_dead_letter)  # fmt: skip
    bad = {"http": 0, "library": 0}
    server = workers or (lambda: 0.0)

    def maker(client: Any, name: str) -> Any:
        def make(k: int) -> Any:
            def call(i: int) -> None:
                d = client.reserve(**body(name, k, i))
                if d.get("decision") != "admit" or d.get("source") == "fail_open":
                    bad[name] += 1
                    return
                client.complete(d["reservation_id"], prompt_tokens=20, output_tokens=10, status="ok")

            return call

        return make

    _pairs(maker(http, "http"), clients, 0.5)  # warm: connections, snapshot, scripts
    _pairs(maker(lib, "library"), clients, 0.5)
    bad.update(http=0, library=0)
    totals = {"http": 0, "library": 0}
    per_round: dict[str, list[int]] = {"http": [], "library": []}
    cpu = {"http": 0.0, "library": 0.0, "http_workers": 0.0}
    print(f"  library vs HTTP mode, {clients} threads, {rounds} alternating rounds of {round_s:.1f} s each; {load()}")
    for r in range(rounds):
        for name, client in (("http", http), ("library", lib)) if r % 2 == 0 else (("library", lib), ("http", http)):
            c0, w0 = time.process_time(), server()
            n = _pairs(maker(client, name), clients, round_s)
            mine, theirs = time.process_time() - c0, server() - w0
            totals[name] += n
            per_round[name].append(n)
            cpu[name] += mine + (theirs if name == "http" else 0.0)
            if name == "http":
                cpu["http_workers"] += theirs
            print(f"    round {r + 1} {name:<8} {n / round_s:9,.0f} pairs/s   CPU {(mine + (theirs if name == 'http' else 0)) / max(n, 1) * 1e3:5.2f} ms/pair"
                  f"   ({load()})")  # fmt: skip
    lib.close()
    lib.backend.clear()
    span = rounds * round_s
    out = {"http_pairs_s": totals["http"] / span, "library_pairs_s": totals["library"] / span}
    # the median of the rounds' ratios (each pair of rounds ran back to back), not the ratio of the totals,
    # which a busy moment in one round would weigh in
    out["rounds"] = [lb / max(hp, 1) for lb, hp in zip(per_round["library"], per_round["http"], strict=True)]
    out["ratio"] = statistics.median(out["rounds"])
    out["ratio_totals"] = out["library_pairs_s"] / out["http_pairs_s"]
    out["http_cpu_ms"] = cpu["http"] / max(totals["http"], 1) * 1e3
    out["http_worker_cpu_ms"] = cpu["http_workers"] / max(totals["http"], 1) * 1e3
    out["library_cpu_ms"] = cpu["library"] / max(totals["library"], 1) * 1e3
    print(f"  HTTP mode    {out['http_pairs_s']:9,.0f} pairs/s   CPU {out['http_cpu_ms']:.2f} ms/pair "
          f"(gunicorn workers {out['http_worker_cpu_ms']:.2f}, the rest this gateway process)")  # fmt: skip
    print(f"  library mode {out['library_pairs_s']:9,.0f} pairs/s   CPU {out['library_cpu_ms']:.2f} ms/pair   "
          f"ratio per round {out['ratio']:.2f} (goal ≥ 5; of the totals {out['ratio_totals']:.2f})")  # fmt: skip
    if bad["http"] or bad["library"]:
        print(f"  !! answers that were not a store admission: {bad}")
    return out


# ---- Redis Cluster: two pools on two nodes vs one ------------------------------------------------


def _tags_on_two_nodes(cluster_url: str, prefix: str) -> tuple[str, str]:
    """Two pool tags (admission.keys.tag) whose slots live on two different nodes."""
    from redis.cluster import RedisCluster, key_slot

    from admission import keys

    rc = RedisCluster.from_url(cluster_url.replace("redis+cluster://", "redis://", 1))
    seen: dict[str, str] = {}
    for pool_id in range(1, 1000):
        t = keys.tag(prefix, pool_id)
        node = rc.nodes_manager.get_node_from_slot(key_slot(t.encode())).name
        seen.setdefault(node, t)
        if len(seen) == 2:
            a, b = seen.values()
            rc.close()
            return a, b
    raise RuntimeError("could not find pools on two nodes")


def _worker(cluster_url: str, tag: str, threads: int, seconds: float, q: Any) -> None:
    """A spawned process: `threads` threads doing reserve + complete on one scope of the pool `tag`."""
    from admission import keys
    from admission.backends.base import Bucket, CompleteOp, ReserveOp, Scope, Where
    from admission.backends.redis import RedisBackend

    b = RedisBackend(cluster_url, prefix=tag.split("{")[0], socket_timeout=1.0)
    s = Scope(inflight_key=keys.inflight(tag, "s"), max_concurrency=10**6, traffic_class="reserved",
              own=Bucket(keys.own(tag, "s"), 1e9, 1e12), pool=Bucket(keys.pool(tag), 1e9, 1e12), borrow=None,
              margin=0.0, degraded=False, reserved_floor=0.0, ttl_s=600.0, idem_ttl_s=60, w_out=4.0, w_cached=0.0,
              tag=tag)  # fmt: skip
    where = Where(tag, s.inflight_key, s.own.key, s.pool.key)

    def make(k: int) -> Any:
        def call(i: int) -> None:
            a = b.reserve(ReserveOp(s, uuid.uuid4().hex, 100.0, "{}"))
            b.complete(CompleteOp(a.parts()[1], 20, 0, 20, "ok", 60, where=where))

        return call

    q.put(_pairs(make, threads, seconds))


def _round(cluster_url: str, tags: list[str], procs: int, threads: int, seconds: float) -> float:
    # fork: a spawned child would import bench/admission.py again (its work dir, its environment).
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    ps = [
        ctx.Process(target=_worker, args=(cluster_url, tags[k % len(tags)], threads, seconds, q)) for k in range(procs)
    ]
    for p in ps:
        p.start()
    total = sum(q.get() for _ in ps)
    for p in ps:
        p.join()
    return total / seconds


def cluster(cluster_url: str, *, procs: int, threads: int, rounds: int, round_s: float) -> dict[str, float]:
    prefix = f"benchc-{uuid.uuid4().hex[:6]}:"
    a, b = _tags_on_two_nodes(cluster_url, prefix)
    print(f"  Redis Cluster {cluster_url}: pools {a} and {b} on two nodes; {procs} processes × {threads} threads, "
          f"{rounds} alternating rounds of {round_s:.1f} s; {load()}")  # fmt: skip
    totals = {"one": 0.0, "two": 0.0}
    for r in range(rounds):
        order = (("one", [a]), ("two", [a, b])) if r % 2 == 0 else (("two", [a, b]), ("one", [a]))
        for name, tags in order:
            rate = _round(cluster_url, tags, procs, threads, round_s)
            totals[name] += rate
            print(f"    round {r + 1} {name} node{'s' if name == 'two' else ' '} {rate:9,.0f} pairs/s   ({load()})")
    from redis.cluster import RedisCluster

    rc = RedisCluster.from_url(cluster_url.replace("redis+cluster://", "redis://", 1))
    for k in rc.scan_iter(match=prefix + "*", count=1000):
        rc.delete(k)
    out = {"one_node": totals["one"] / rounds, "two_nodes": totals["two"] / rounds}
    out["ratio"] = out["two_nodes"] / out["one_node"]
    print(f"  one node   {out['one_node']:9,.0f} pairs/s")
    print(f"  two nodes  {out['two_nodes']:9,.0f} pairs/s   ratio {out['ratio']:.2f} (goal ≥ 1.6)")
    return out
