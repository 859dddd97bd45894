"""The compiled ext_proc front (integrations/envoy/front/front.cc) and its Python decision worker
(integrations/envoy/front_worker.py) as real processes, for the tests and bench/gateway_envoy.py: the
binary built with make on first use, outside the tree; each started in its own session, its start-up
bounded (a hang guard, not a timing assertion), stopped at exit."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.integrations import stack

FRONT_DIR = stack.ROOT / "integrations" / "envoy" / "front"
BUILD = Path(tempfile.gettempdir()) / "headroom-front"
APT = "apt-get install -y g++ make pkg-config libgrpc++-dev libprotobuf-dev"


def build() -> tuple[Path | None, str]:
    """front.cc compiled into $TMPDIR/headroom-front (make: again only when it changed) → (the binary,
    "") or (None, why not: a missing tool or library, or the compiler's error)."""
    missing = [t for t in ("make", "g++", "pkg-config") if shutil.which(t) is None]
    if not missing and subprocess.run(["pkg-config", "--exists", "grpc++"], check=False).returncode:
        missing.append("grpc++ (libgrpc++-dev)")
    if missing:
        return None, f"{', '.join(missing)} missing ({APT})"
    r = subprocess.run(["make", "-s", "-C", str(FRONT_DIR), f"OUT={BUILD}"], capture_output=True, text=True,
                       check=False)  # fmt: skip
    if r.returncode:
        return None, "its build failed:\n" + r.stderr[-2000:]
    return BUILD / "front", ""


Started = stack.Child  # a worker or the front: ready when its sockets accept / its log says so


def accepts(path: str) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(path)
        except OSError:
            return False
        return True


def worker_cmd(path: Path, processes: int = 1) -> list[str]:
    return [sys.executable, "-m", "integrations.envoy.front_worker", "--socket", str(path), "--processes",
            str(processes)]  # fmt: skip


def worker_env(env: dict[str, str]) -> dict[str, str]:
    return stack.child_env(PYTHONPATH=str(stack.ROOT), **env)


def worker_sockets(path: Path, processes: int = 1) -> list[str]:
    return [str(path)] if processes == 1 else [f"{path}.{i}" for i in range(processes)]


def worker(path: Path, env: dict[str, str], log: Path, *, processes: int = 1) -> Started:
    """front_worker.py serving `path` (several processes: path.0 …), with these HEADROOM_* settings."""
    paths = worker_sockets(path, processes)
    return Started(worker_cmd(path, processes), env=worker_env(env), log=log, ready=lambda: all(map(accepts, paths)))


def front(binary: Path, port: int, sockets: list[str], log: Path) -> Started:
    """The front on 127.0.0.1:`port`, started once it is connected to every worker socket."""

    start = log.stat().st_size if log.exists() else 0  # the log is appended to: this run's lines only

    def ready() -> bool:
        text = log.read_bytes()[start:].decode(errors="replace") if log.exists() else ""
        return "listening on" in text and all(f"connected to worker {s}\n" in text for s in sockets)

    return Started([str(binary), f"127.0.0.1:{port}", *sockets], env=stack.child_env(), log=log, ready=ready)


def serve(
    stop: contextlib.ExitStack, binary: Path, work: Path, env: dict[str, str], processes: int = 1
) -> tuple[int, list[int]]:
    """`processes` decision workers and the front before them, stopped with `stop` → (the front's port,
    [the front's pid, the workers' pids…]: a supervisor's children too, for their CPU)."""
    sock = work / "front.sock"
    w = worker(sock, env, work / "front_worker.out", processes=processes)
    stop.callback(w.stop)
    port = stack.free_port()
    f = front(binary, port, worker_sockets(sock, processes), work / "front.out")
    stop.callback(f.stop)
    kids = Path(f"/proc/{w.proc.pid}/task/{w.proc.pid}/children")
    return port, [f.proc.pid, w.proc.pid, *(int(c) for c in kids.read_text().split())]
