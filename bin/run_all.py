"""`make run`: the web app and the processes beside it, supervised, stopped together on Ctrl-C (or SIGTERM).

A child that exits is logged and started again after a back-off (1 s, doubling to 30 s; back to 1 s once
it has run a minute): an events worker that fell over on a Redis blip comes back, and the rest keep
running. Only Ctrl-C or SIGTERM stops the whole app.

Two shapes, chosen from the environment the settings read:

- embedded (no REDIS_URL): the admission store lives in the web process, so gunicorn runs ONE
  worker with threads (several processes would each keep their own buckets and over-admit); with no
  beat, `evaluate_alerts --every 60` evaluates alert rules.
- scaled (REDIS_URL): several gunicorn workers share the Redis store; a Celery worker and beat run
  beside them (the broker is CELERY_BROKER_URL, else REDIS_URL), and beat evaluates alert rules.
  CELERY_BROKER_URL without REDIS_URL gets the worker and beat but still one web process.

The fleet simulator (HEADROOM_SIMULATE=1, the default) drives traffic at the web server in both.
Each child runs in a process group of its own, so stopping one also stops what it forked (gunicorn's
and Celery's workers); `--print` shows the processes without starting them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE_S = 10.0  # SIGTERM, then SIGKILL for a group still alive after this long
BACKOFF_S, BACKOFF_MAX_S, STABLE_S = 1.0, 30.0, 60.0  # restart delays; a child up this long is well again


@dataclass(frozen=True)
class Proc:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def plan(env: dict[str, str], *, host: str, port: int, python: str = sys.executable) -> list[Proc]:
    """The processes `make run` starts for this environment, in start order."""
    redis_url = env.get("REDIS_URL", "")
    broker = env.get("CELERY_BROKER_URL", "") or redis_url
    shared_store = bool(redis_url) and env.get("ADMISSION_BACKEND", "redis") == "redis"
    workers = int(env.get("WEB_CONCURRENCY", "0")) or (2 * (os.cpu_count() or 1) if shared_store else 1)
    if not shared_store:
        workers = 1  # the in-process admission store: one process, or each worker over-admits
    threads = env.get("GUNICORN_THREADS", "8")
    manage = [python, str(ROOT / "manage.py")]
    # Each web server gets its own metrics directory: gunicorn.py empties it when it starts.
    web_env = {"PROMETHEUS_MULTIPROC_DIR": str(ROOT / "var" / f"prometheus-{port}")}
    web_env |= {"CELERY_BROKER_URL": broker} if broker else {}
    procs = [
        Proc(
            "web",
            [
                python,
                "-m",
                "gunicorn",
                "-c",
                str(ROOT / "config" / "gunicorn.py"),
                "config.wsgi",
                "--bind",
                f"{host}:{port}",
                "--workers",
                str(workers),
                "--threads",
                threads,
            ],
            web_env,
        )  # fmt: skip
    ]
    if broker:
        celery = [python, "-m", "celery", "-A", "config"]
        general = [*celery, "worker", "-X", "admission-events", "--loglevel", "WARNING"]
        procs.append(Proc("worker", general, {"CELERY_BROKER_URL": broker}))
        procs.append(Proc("beat", [*celery, "beat", "--loglevel", "WARNING"], {"CELERY_BROKER_URL": broker}))
        # Admission events' own queue (config/settings.py CELERY_TASK_ROUTES): a forecast run on the
        # default queue never holds them back.
        # Threads, not prefork: a prefork worker that lost its broker could wait for ever in its warm
        # shutdown on a child blocked writing to it (billiard's pool join; seen in the kill test: the
        # worker sat in "Shutting down..." and was never restarted). Ingest waits on PostgreSQL, not
        # on the GIL, so two threads do what two processes did.
        events = [*celery, "worker", "-Q", "admission-events", "-n", "events@%h", "--pool", "threads",
                  "--concurrency", "2", "--loglevel", "WARNING"]  # fmt: skip
        procs.append(Proc("events", events, {"CELERY_BROKER_URL": broker}))
    else:
        # No beat in the embedded default: evaluate alert rules (and send due webhook retries) every minute.
        procs.append(Proc("alerts", [*manage, "evaluate_alerts", "--every", "60"]))
    if env.get("HEADROOM_SIMULATE", "1") == "1":
        sim = [*manage, "simulate_fleet", "--base-url", f"http://{host}:{port}", "--load", "0.9"]
        procs.append(Proc("simulator", [*sim, "--spike-at-minute", "10"]))
    return procs


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def stop_all(children: list[subprocess.Popen]) -> None:
    """SIGTERM every child's group, wait, then SIGKILL what is left; newest first."""
    for p in reversed(children):
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    for p in reversed(children):
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    for p in children:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)  # the group: a worker its parent left behind goes too
        p.wait()


class Supervisor:
    """Starts the processes and restarts any that exits, after a back-off that doubles while it keeps failing."""

    def __init__(
        self, procs: list[Proc], *, env: dict[str, str], backoff_s: float = BACKOFF_S,
        backoff_max_s: float = BACKOFF_MAX_S, stable_s: float = STABLE_S, log: Any = None,
    ) -> None:  # fmt: skip
        self.procs, self.env = procs, env
        self.backoff_s, self.backoff_max_s, self.stable_s = backoff_s, backoff_max_s, stable_s
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.children: dict[str, subprocess.Popen] = {}
        self.started_at: dict[str, float] = {}
        self.failures: dict[str, int] = {}  # exits in a row without a stable run
        self.due: dict[str, float] = {}  # when an exited child is started again
        self.restarts: dict[str, int] = {}

    def start(self, p: Proc) -> None:
        self.children[p.name] = subprocess.Popen(p.argv, cwd=ROOT, env={**self.env, **p.env}, start_new_session=True)
        self.started_at[p.name] = time.monotonic()

    def tick(self) -> None:
        """Notice exits, schedule their restarts, and make the restarts that are due."""
        now = time.monotonic()
        for p in self.procs:
            child = self.children.get(p.name)
            if child is None:
                continue
            rc = child.poll()
            if rc is not None and p.name not in self.due:
                stable = now - self.started_at[p.name] >= self.stable_s
                n = 0 if stable else self.failures.get(p.name, 0)
                self.failures[p.name] = n + 1
                delay = min(self.backoff_s * 2**n, self.backoff_max_s)
                self.due[p.name] = now + delay
                self.log(f"run_all: {p.name} exited with {rc}; starting it again in {delay:g} s")
            if p.name in self.due and now >= self.due[p.name]:
                del self.due[p.name]
                self.restarts[p.name] = self.restarts.get(p.name, 0) + 1
                self.start(p)
                self.log(f"run_all: {p.name} started again (restart {self.restarts[p.name]})")

    def stop(self) -> None:
        stop_all(list(self.children.values()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--print", action="store_true", help="print the processes and exit")
    args = ap.parse_args()
    procs = plan(dict(os.environ), host=args.host, port=args.port)
    if args.print:
        for p in procs:
            extra = " ".join(f"{k}={v}" for k, v in p.env.items())
            print(f"{p.name}: {extra + ' ' if extra else ''}{' '.join(p.argv)}")
        return 0

    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    (ROOT / "var").mkdir(exist_ok=True)
    sup = Supervisor(procs, env=dict(os.environ))
    try:
        for p in procs:
            if p.name == "simulator":  # it needs the web server answering first
                while not stopping and not _answers(args.host, args.port):
                    sup.tick()
                    time.sleep(0.2)
            if stopping:
                break
            sup.start(p)
        print(f"run_all: started {', '.join(sup.children)}", flush=True)
        while not stopping:
            sup.tick()
            time.sleep(0.2)
    finally:
        sup.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
