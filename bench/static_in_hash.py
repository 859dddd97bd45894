"""Issue 49 item 1: would the scope's static values cost Redis less read from the scope's hash than sent as
arguments? Four scripts on a private redis-server, each call's own time from SLOWLOG (threshold 0), 20 rounds
of 100 calls a side, interleaved, the order reversed each round:

  args      the 27 static values as ARGV (as the reserve sent them before issue 49's last cut), 3 converted
  hash      one hash field holding them (a stamp first), split by one string.match, 3 converted
  short     the same with the two long record strings as fields of their own (HMGET), the rest matched
  none      neither (the baseline: the per-call arguments and the scope's HMGET alone)

Run: BENCH_REDIS_URL=redis://127.0.0.1:<port>/0 .venv/bin/python bench/static_in_hash.py (a private server:
the slow log is reset).
"""

from __future__ import annotations

import os
import statistics

import redis

REC = ("b:{p1}:if:acme::llama-test:us-test:reserved\tb:{p1}:b:acme::llama-test:us-test:reserved\t100000.0\t"
       "6000000.0\tb:{p1}:p\t280000.0\t16800000.0\t4.0\t0.0\t2000")  # fmt: skip
STATIC = ["reserved", "1000000", "100000.0", "6000000.0", "280000.0", "16800000.0", "0.0", "0.0", "3360000.0", "0",
          "-12000000.0", "600", "1500", "1", "5", "10", REC, REC, "0.0", "0.0", "0.0", "", "60.0", "0.0", "0", "0.0",
          "0.0"]  # fmt: skip
KEYS = ["b:{p1}:r:x", "b:{p1}:b:acme", "b:{p1}:p", "b:{p1}:bb", "b:{p1}:if", "b:{p1}:ifs", "b:{p1}:ln", "b:{p1}:fs"]
PER = ["", "741b2784f7b6211b5c8b27d528788c7f", "100.0", '{"request_id":"c-0","project":"","estimated_wt":100.0}']
SEP = "\x1e"


def _pattern(n: int, rest: bool) -> str:
    return "^" + "\\30".join(["([^\\30]*)"] * n) + ("\\30(.*)$" if rest else "\\30")


def main() -> int:
    r = redis.Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6474/0"))
    hot = [*STATIC[:18], STATIC[24], "", "", ""]  # 19 read on every call, the limits' 3; the lazy ones as the rest
    lazy = [STATIC[i] for i in (18, 19, 20, 21, 22, 23, 25, 26)]
    short = [h for i, h in enumerate(hot) if i not in (16, 17)]
    r.hset(KEYS[1], mapping={"c": SEP.join(["stamp001", *hot, SEP.join(lazy)]), "l": "1", "t": "2",
                             "c2": SEP.join(["stamp001", *short, SEP.join(lazy)]), "ro": REC})  # fmt: skip
    n1, n2 = 1 + len(hot), 1 + len(short)
    head = "local a1, a2, a3, a4, a5 = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]\n"
    tail = "if s0 ~= a5 then return 0 end\nlocal x = tonumber(s5) + tonumber(s6) + tonumber(s7)\nreturn 1"
    src = {
        "args": "\n".join(f"local a{i} = ARGV[{i}]" for i in range(1, 32))
        + "\nlocal x = tonumber(a6) + tonumber(a7) + tonumber(a8)\n"
        "local v = redis.call('HMGET', KEYS[2], 'l', 't', KEYS[5])\nreturn 1",
        "hash": head
        + "local v = redis.call('HMGET', KEYS[2], 'l', 't', KEYS[5], 'c')\nlocal "
        + ", ".join(f"s{i}" for i in range(n1 + 1))
        + f" = string.match(v[4], '{_pattern(n1, True)}')\n"
        + tail,
        "short": head
        + "local v = redis.call('HMGET', KEYS[2], 'l', 't', KEYS[5], 'c2', 'ro')\nlocal "
        + ", ".join(f"s{i}" for i in range(n2))
        + f" = string.match(v[4], '{_pattern(n2, False)}')\n"
        + tail,
        "none": "local v = redis.call('HMGET', KEYS[2], 'l', 't', KEYS[5])\nreturn 1",
    }
    sha = {k: r.script_load(v) for k, v in src.items()}
    extra = {"args": STATIC, "hash": ["stamp001"], "short": ["stamp001"], "none": []}
    for k in sha:
        assert r.evalsha(sha[k], len(KEYS), *KEYS, *PER, *extra[k]) == 1, k  # each read what it should
    r.config_set("slowlog-log-slower-than", 0)
    r.config_set("slowlog-max-len", 1000)
    took: dict[str, list[int]] = {k: [] for k in sha}
    for rnd in range(20):
        for k in list(sha) if rnd % 2 == 0 else list(sha)[::-1]:
            r.slowlog_reset()
            for _ in range(100):
                r.evalsha(sha[k], len(KEYS), *KEYS, *PER, *extra[k])
            took[k] += [e["duration"] for e in r.slowlog_get(1000) if e["command"].upper().startswith(b"EVALSHA")]
    r.config_set("slowlog-log-slower-than", 10000)
    r.delete(KEYS[1])
    print(f"µs per call (SLOWLOG): median / mean of 20 × 100; load average {os.getloadavg()[0]:.2f}")
    for k, v in took.items():
        print(f"  {k:<6} {statistics.median(v):5.1f} {statistics.mean(v):6.2f}  (n={len(v)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
