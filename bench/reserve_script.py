"""Redis' own time per reserve script (issue 35.3): what the serving path's one EVALSHA costs the Redis
server, beside an INCR and an empty script, so the floor under "library reserve ÷ INCR" is a reading,
not a guess.

A real reserve is made once per scope through the web tier (admission.services, the same script and
arguments as the library) with the backend's EVALSHA captured; that call is then replayed, each time with
a fresh reservation id, in blocks under a key prefix of its own (a block's keys are deleted after it).
Redis' INFO commandstats gives the server's microseconds per call for each block (the difference of its
counters before and after: nothing is reset, and no other client should use the server meanwhile). The
blocks run in rounds, the order reversed every round:

  INCR                                    one key
  empty script                            `return 1`, no arguments
  empty script, the reserve's arguments   `return 1` with the plain scope's KEYS and ARGV (what passing them costs)
  reserve, plain scope                    reserve.lua as the library sends it (a token rate)
  reserve, budgeted scope                 the same with two period budgets and a request rate
  … (old script)                          the same two, replayed with reserve.lua and the layout as they were
                                          before issue 49.1 (commit OLD, the same values: old_wire), side by side

Each block also counts the commands the script ran per call (INFO commandstats' calls of every command
but EVALSHA and INFO, over the block), the figure issue 49's goal counts.

INCR's wall time per call (this client, one connection) is taken in the same blocks, so the last lines
print the floor that the script's server time alone puts under "reserve ÷ INCR" whatever the client does:
(INCR wall + script server time − INCR server time) ÷ INCR wall.
Needs Redis: BENCH_REDIS_URL (default redis://127.0.0.1:6379/13).
Run: .venv/bin/python bench/reserve_script.py [--n 2000] [--rounds 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

from bench import admission as adm  # noqa: E402 - after the path (sets the bench's environment)

# The store's layout before issue 49.1 (the same values, each LAZY one an argument of its own: old_wire): every reserve read the
# in-flight zset twice (ZCOUNT, ZRANGEBYSCORE), listed it for the sweep (SADD), kept the request-rate
# bucket under a key of its own and read each period budget with a GET of its own.
OLD = "ead91d8"


def old_source(rev: str = OLD) -> str:
    """reserve.lua as loaded at commit `rev` (lib.lua, the generated preamble, the script)."""

    def show(path: str) -> str:
        return subprocess.run(
            ["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, check=True, text=True
        ).stdout

    old_inputs: dict = {"__name__": "old_inputs"}
    exec(compile(show("admission/backends/inputs.py"), "old_inputs", "exec"), old_inputs)  # noqa: S102  (our own history)
    return (
        show("admission/backends/lua/lib.lua")
        + "\n"
        + old_inputs["lua_preamble"]()
        + show("admission/backends/lua/reserve.lua")
    )


def _resp_args(packed: bytes) -> list[bytes]:
    """The bulk strings of a RESP fragment (the backend's pre-packed static arguments)."""
    out, i = [], 0
    while i < len(packed):
        j = packed.index(b"\r\n", i)
        n = int(packed[i + 1 : j])
        out.append(packed[j + 2 : j + 2 + n])
        i = j + 4 + n
    return out


def old_wire(static: list[bytes]) -> list[bytes]:
    """The static arguments as the scripts before issue 49's last cut took them: each LAZY number an argument of
    its own, and the borrowed record's middle sent whole (now '' for a scope that cannot borrow)."""
    from admission.backends import inputs

    names = [n for n, _ in inputs.STATIC if n not in inputs.LAZY or n == inputs.LAZY_ORDER[0]]
    got = dict(zip(names, static, strict=True))
    lazy = dict(zip(inputs.LAZY_ORDER, got[inputs.LAZY_ORDER[0]].split(b"\t"), strict=True))
    if got["record_borrowed"] == b"":
        got["record_borrowed"] = got["record_own"]
    return [lazy[n] if n in inputs.LAZY else got[n] for n, _ in inputs.STATIC]


def _sub(x, old: str, new: str):
    if isinstance(x, bytes):
        return x.replace(old.encode(), new.encode())
    return x.replace(old, new) if isinstance(x, str) else x


class Captured:
    """One reserve's EVALSHA as the backend sent it, replayable under a new prefix and reservation id."""

    def __init__(self, script, nkeys: int, args: tuple, tail: tuple, extra: tuple) -> None:
        self.sha, self.nkeys = script.sha, nkeys
        self.args = list(args)
        self.static = _resp_args(tail[1]) if tail[0] else []
        self.extra = list(extra)
        self.prefix = str(args[0]).split(":", 1)[0]  # every key and key-naming value starts with it

    def call(self, r, prefix: str, i: int, sha=None, old: bool = False):
        """One replay with every key under `prefix` and a reservation id of its own (`sha`: another script;
        `old`: one that takes the static arguments as they were sent before, old_wire)."""
        rid = f"{i:08x}{uuid.uuid4().hex[:8]}"
        a = [_sub(x, self.prefix, prefix) for x in self.args]
        rec = a[0].rsplit(":", 1)
        a[0] = f"{rec[0]}:{rid}"  # KEYS[1], the record
        a[self.nkeys + 1] = rid  # ARGV[2], the reservation id
        st = [_sub(x, self.prefix, prefix) for x in (old_wire(self.static) if old else self.static)]
        ex = [_sub(x, self.prefix, prefix) for x in self.extra]
        return r.execute_command("EVALSHA", sha or self.sha, self.nkeys, *a, *st, *ex)


def capture(tenant: str) -> Captured:
    from admission import services
    from admission.backends import get_backend

    backend = get_backend()
    got: list[Captured] = []
    real = backend._eval

    def spy(script, nkeys, args, tail=(0, b""), extra=()):
        got.append(Captured(script, nkeys, args, tail, extra))
        return real(script, nkeys, args, tail, extra)

    backend._eval = spy
    try:
        d = services.reserve(services.parse_reserve(adm.body(0, "capture", tenant)))
    finally:
        backend._eval = real
    assert d.status == 200 and got, d.body
    return got[0]


def commandstat(r, cmd: str) -> tuple[int, int]:
    s = r.info("commandstats").get(f"cmdstat_{cmd}", {})
    return int(s.get("calls", 0)), int(s.get("usec", 0))


def inner_calls(r) -> int:
    """Every command Redis counted but EVALSHA and INFO: what scripts ran (and any other client sent)."""
    return sum(
        int(v.get("calls", 0))
        for k, v in r.info("commandstats").items()
        if k not in ("cmdstat_evalsha", "cmdstat_info")
    )


def block(r, cmd: str, fn, n: int) -> tuple[float, float, float]:
    """n calls of fn: → (Redis' µs per call of `cmd`, this client's wall µs per call, commands per call
    besides `cmd`)."""
    c0, u0 = commandstat(r, cmd)
    k0 = inner_calls(r)
    t = time.perf_counter()
    for i in range(n):
        fn(i)
    wall = (time.perf_counter() - t) / n * 1e6
    k1 = inner_calls(r)
    c1, u1 = commandstat(r, cmd)
    assert c1 - c0 >= n, f"{cmd}: {c1 - c0} calls counted for {n} (is the server shared?)"
    return (u1 - u0) / (c1 - c0), wall, (k1 - k0) / n


def per_call(r, sides: dict, args, plain: Captured) -> int:
    """Each script call's own server time from SLOWLOG (threshold 0: every command logged with its µs),
    batches of 100 calls per side, interleaved: the low percentiles are the script's work without the
    preemptions a loaded machine adds to a block's mean (a private server only: the log is reset)."""
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 4000)
    took: dict[str, list[int]] = {k: [] for k in sides}
    names = list(sides)
    for rnd in range(args.rounds * 4):
        for name in names if rnd % 2 == 0 else names[::-1]:
            fn = sides[name][1]
            fn.prefix = "b" + uuid.uuid4().hex[: len(plain.prefix) - 1]
            r.slowlog_reset()
            for i in range(100):
                fn(i)
            for e in r.slowlog_get(4000):
                cmd = e["command"]
                if isinstance(cmd, bytes):
                    cmd = cmd.decode(errors="replace")
                if cmd.upper().startswith("EVALSHA"):
                    took[name].append(int(e["duration"]))
            for k in r.scan_iter(fn.prefix + "*", count=1000):
                r.delete(k)
    r.config_set("slowlog-log-slower-than", 10000)
    print(
        f"Per call (SLOWLOG), µs: p10 / p25 / median / p90 / mean of {args.rounds * 4} × 100 calls a side; {adm.load()}"
    )
    q = {k: statistics.quantiles(v, n=20) for k, v in took.items()}
    for k in names:
        print(f"  {k:<40} {q[k][1]:6.1f} {q[k][4]:6.1f} {q[k][9]:6.1f} {q[k][17]:6.1f} {statistics.mean(took[k]):6.1f}"
              f"  (n={len(took[k])})")  # fmt: skip
    for k in ("reserve, plain scope", "reserve, budgeted scope"):
        for other in (" (old script)", " (base script)"):
            if k + other in q:
                m = statistics.mean(took[k]) / statistics.mean(took[k + other])
                print(f"  {k}: new ÷ {other.strip(' ()')}, p10 {q[k][1] / q[k + other][1]:.2f},"
                      f" p25 {q[k][4] / q[k + other][4]:.2f}, median {q[k][9] / q[k + other][9]:.2f},"
                      f" mean {m:.2f}")  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="calls per block")
    ap.add_argument("--rounds", type=int, default=6, help="rounds, the block order reversed each round (≥ 5)")
    ap.add_argument("--per-call", action="store_true", help="per-call times from SLOWLOG (a private server)")
    ap.add_argument("--base", default="", help="also replay the scripts of this commit (a step between old and new)")
    ap.add_argument("--base-wire-new", action="store_true", help="--base's scripts take today's wire (old_wire)")
    args = ap.parse_args()
    os.environ["ADMISSION_KEY_PREFIX"] = f"bench-{uuid.uuid4().hex[:8]}:"
    import redis

    r = redis.Redis.from_url(adm.ENV["REDIS_URL"], socket_timeout=5)
    print(
        f"reserve script bench (n={args.n} per block, {args.rounds} rounds, Redis {adm.ENV['REDIS_URL']}); {adm.load()}"
    )
    incr_key = f"adm-bench:incr:{uuid.uuid4().hex[:8]}"
    backend = None
    try:
        adm.setup_db()
        from django.conf import settings

        from admission import params
        from admission.backends import get_backend

        settings.ADMISSION_KEY_PREFIX = os.environ["ADMISSION_KEY_PREFIX"]
        params.invalidate()
        backend = get_backend()
        plain, budgeted = capture("acme"), capture("globex")
        empty = r.script_load("return 1")
        old = r.script_load(old_source())
        base = r.script_load(old_source(args.base)) if args.base else None
        base_new = base if args.base_wire_new else None  # --base of a commit that already sends the new wire

        def with_args(i: int) -> None:
            r.execute_command("EVALSHA", empty, plain.nkeys, *plain.args, *plain.static, *plain.extra)

        class Replay:
            """Replays of one captured reserve, under the prefix of the block in progress."""

            def __init__(self, c: Captured, sha=None) -> None:
                self.c, self.prefix, self.sha = c, "", sha
                self.old = sha is not None and sha != base_new  # an earlier commit's script: the earlier wire

            def __call__(self, i: int) -> None:
                out = self.c.call(r, self.prefix, i, self.sha, self.old)
                assert out[0][:1] == b"A", out[0]  # every replay admitted: the same work each time

        sides = {
            "INCR": ("incrby", lambda i: r.incr(incr_key)),
            "empty script": ("evalsha", lambda i: r.evalsha(empty, 0)),
            "empty script, the reserve's arguments": ("evalsha", with_args),
            "reserve, plain scope": ("evalsha", Replay(plain)),
            "reserve, budgeted scope": ("evalsha", Replay(budgeted)),
            "reserve, plain scope (old script)": ("evalsha", Replay(plain, old)),
            "reserve, budgeted scope (old script)": ("evalsha", Replay(budgeted, old)),
        }
        if base:
            sides["reserve, plain scope (base script)"] = ("evalsha", Replay(plain, base))
            sides["reserve, budgeted scope (base script)"] = ("evalsha", Replay(budgeted, base))

        def run_block(name: str, n: int) -> tuple[float, float, float]:
            cmd, fn = sides[name]
            if not isinstance(fn, Replay):
                return block(r, cmd, fn, n)
            fn.prefix = "b" + uuid.uuid4().hex[: len(plain.prefix) - 1]  # the same length: the same argument sizes
            try:
                return block(r, cmd, fn, n)
            finally:
                for k in r.scan_iter(fn.prefix + "*", count=1000):
                    r.delete(k)

        for name in sides:  # warm: scripts cached, connections open
            run_block(name, 50)
        if args.per_call:
            return per_call(r, {k: v for k, v in sides.items() if isinstance(v[1], Replay)}, args, plain)
        got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in sides}
        names = list(sides)
        for rnd in range(args.rounds):
            for name in names if rnd % 2 == 0 else names[::-1]:
                got[name].append(run_block(name, args.n))
            print(
                f"  round {rnd + 1}: " + ", ".join(f"{k} {got[k][-1][0]:.1f}" for k in names) + f" µs  ({adm.load()})"
            )
        print(f"Redis server time per call, median of {args.rounds} rounds (µs); {adm.load()}:")
        med = {k: statistics.median(x[0] for x in v) for k, v in got.items()}
        for k in names:
            cmds = statistics.median(x[2] for x in got[k])
            print(f"  {k:<40} {med[k]:7.1f}   (rounds {min(x[0] for x in got[k]):.1f}-{max(x[0] for x in got[k]):.1f}),"
                  f" {cmds:.1f} commands in the script")  # fmt: skip

        def paired(a: str, b: str) -> float:
            """The median of the rounds' own ratios (each round's blocks ran side by side: less load noise)."""
            return statistics.median(x[0] / y[0] for x, y in zip(got[a], got[b], strict=True))

        for k in ("reserve, plain scope", "reserve, budgeted scope"):
            print(f"  {k}: new ÷ old script, Redis server time: {med[k] / med[k + ' (old script)']:.2f}"
                  f" (median of the rounds' ratios {paired(k, k + ' (old script)'):.2f})")  # fmt: skip
            if base:
                b = med[k + " (base script)"]
                print(
                    f"  {k}: {args.base} ÷ old {b / med[k + ' (old script)']:.2f}, new ÷ {args.base} {med[k] / b:.2f}"
                    f" (rounds' ratios: {paired(k + ' (base script)', k + ' (old script)'):.2f},"
                    f" {paired(k, k + ' (base script)'):.2f})"
                )
        incr_wall = statistics.median(x[1] for x in got["INCR"])
        print(f"  INCR wall time per call on this client: {incr_wall:.0f} µs")
        for k, goal in (("reserve, plain scope", 1.35), ("reserve, budgeted scope", 1.5)):
            floor = (incr_wall + med[k] - med["INCR"]) / incr_wall
            print(f"  floor under {k} ÷ INCR from the script's server time alone: {floor:.2f}  (goal ≤ {goal})")
        return 0
    finally:  # each block's keys went with it (run_block)
        r.delete(incr_key)
        if backend is not None:
            backend.clear()
        adm.shutil.rmtree(adm.TMP, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
