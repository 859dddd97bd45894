"""What the gateway benches (bench/gateway_litellm.py, bench/gateway_envoy.py) share: the same load on
each gateway (`hammer`: keep-alive client threads sending small chat completions), sent in short rounds
that alternate the gateways and reverse their order every round (ABC CBA ...), so that a change in
the machine's load hits all alike (`interleaved`), and the verdict line per gateway (`verdicts`)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bench.admission as ab  # the bench portal (its environment set on import)
from bench import admission_modes

BODY = json.dumps({"model": "llama-test", "max_tokens": 20,
                   "messages": [{"role": "user", "content": "a short question for the bench"}]}).encode()  # fmt: skip
HEADERS = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def hammer(port: int, clients: int, seconds: float, bad: list[str]) -> int:
    """`clients` keep-alive threads for `seconds`; → requests answered (any answer but a 200 is put in `bad`)."""

    def client(k: int) -> Callable[[int], None]:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

        def call(i: int) -> None:
            c.request("POST", "/v1/chat/completions", body=BODY, headers=HEADERS)
            r = c.getresponse()
            raw = r.read()
            if r.status != 200:
                bad.append(f"{r.status} {raw[:200]!r}")

        return call

    return admission_modes._pairs(client, clients, seconds)


def cleanup(gun: Any, prefix: str, work: Path) -> None:
    """After a gateway bench: the bench portal stopped, its Redis keys and the work directories gone."""
    if gun is not None:
        import redis

        ab.cleanup(redis.Redis.from_url(ab.ENV["REDIS_URL"]), None, gun, f"{prefix}none")
    from admission.backends.redis import RedisBackend

    RedisBackend(ab.ENV["REDIS_URL"], prefix=prefix).clear()
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(ab.TMP, ignore_errors=True)


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used: /proc/PID/stat's utime + stime."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def interleaved(targets: dict[str, int], *, clients: int, rounds: int, round_s: float, bad: list[str],
                pids: dict[str, int] | None = None) -> dict[str, int] | None:  # fmt: skip
    """Requests answered per target (name → port) over `rounds` rounds of `round_s` seconds each,
    the order reversed every round, a line per round with the load average; None on a non-200.
    `pids` (process name → pid): then a line per target with the CPU time each process (and the
    clients, this process) spent per request while that target was served: where a request's CPU goes."""
    names = list(targets)
    totals = dict.fromkeys(names, 0)
    procs = {"clients": os.getpid(), **(pids or {})}
    cpu = {name: dict.fromkeys(procs, 0.0) for name in names}
    for r in range(rounds):
        row = []
        for name in names if r % 2 == 0 else names[::-1]:
            before = {p: cpu_s(pid) for p, pid in procs.items()}
            n = hammer(targets[name], clients, round_s, bad)
            for p, pid in procs.items():
                cpu[name][p] += cpu_s(pid) - before[p]
            totals[name] += n
            row.append(f"{name}: {n / round_s:.0f}/s")
        print(f"  round {r + 1}: " + ", ".join(row) + f"   ({load()})")
        if bad:
            print("non-200 answers:", bad[:3])
            return None
    if pids:
        for name in names:
            per = {p: 1000 * c / max(totals[name], 1) for p, c in cpu[name].items()}
            print(f"  CPU per request, {name}: {sum(per.values()):.2f} ms = "
                  + ", ".join(f"{p} {ms:.2f}" for p, ms in per.items() if ms >= 0.005))  # fmt: skip
    return totals


def verdicts(totals: dict[str, int], seconds: float, goal: float, *, binding: str = "library") -> tuple[bool, dict]:
    """A line per target: its requests/s and, for all but the first (the baseline), the ratio to it
    against `goal`. → (every target whose name holds `binding` meets the goal, name → ratio)."""
    names = list(totals)
    base, ok, ratios = totals[names[0]], True, {}
    for name in names:
        line = f"  {name}: {totals[name] / seconds:.1f} requests/s"
        if name != names[0]:
            ratios[name] = ratio = totals[name] / base if base else 0.0
            line += f" = {ratio:.2f} × without ({'meets' if ratio >= goal else 'MISSES'} the {goal} × goal)"
            ok &= ratio >= goal or binding not in name  # the goal is library mode's (Redis shared); HTTP is printed
        print(line)
    return ok, ratios
