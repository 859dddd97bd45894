"""Issue 37's LiteLLM goal: the proxy's requests/s with Headroom's callback ≥ 0.8 × without it.

Real processes: the test upstream (tests/integrations/upstream.py, one uvicorn process), the bench
portal (bench/admission.py's SQLite world and gunicorn, Redis at BENCH_REDIS_URL), and three
`litellm` proxies (one worker each, from the gateway venv `make gateways` builds) before the same
upstream: without the callback, with it in library mode (same Redis), with it in HTTP mode (the
portal's API). `--clients` threads send small chat completions (keep-alive, max_tokens 20) to one
proxy at a time, in short rounds that alternate the proxies and reverse their order every round
(ABC CBA ...), so a change in the machine's load hits all alike; the load average is printed
beside each round. Every answer must be a 200 (a throttle or an error fails the bench).

Run: .venv/bin/python bench/gateway_litellm.py [--clients 8] [--rounds 6] [--round-s 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/: its admission.py would shadow the admission app

import bench.admission as ab  # noqa: E402 - after the path fix; sets the bench portal's environment
from bench.rounds import cleanup, hammer, interleaved, load, verdicts  # noqa: E402
from tests.integrations import stack  # noqa: E402

GOAL = 0.8
KEYS = {"sk-bench": {"team_alias": "acme", "metadata": {"headroom_traffic_class": "reserved"}}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--round-s", type=float, default=3.0)
    args = ap.parse_args()
    stack.need_litellm()
    work = Path(tempfile.mkdtemp(prefix="litellm-bench-"))
    prefix = f"benchllm-{uuid.uuid4().hex[:6]}:"
    gun = None
    procs: list = []
    try:
        token = ab.setup_db()
        port = ab.free_port()
        gun = ab.start_gunicorn(port)
        portal = f"http://127.0.0.1:{port}"
        up_cm = stack.upstream(work)
        up = up_cm.__enter__()
        procs.append(up_cm)
        modes = {
            "without Headroom": (False, {}),
            "Headroom, library mode": (
                True,
                {
                    "HEADROOM_REDIS_URL": ab.ENV["REDIS_URL"],
                    "HEADROOM_KEY_PREFIX": prefix,
                    "HEADROOM_SIGNING_KEY": "bench-litellm-key",
                },
            ),  # fmt: skip
            "Headroom, HTTP mode": (True, {"HEADROOM_TIMEOUT_S": "2"}),
        }
        gws = {}
        for i, (name, (hook, env)) in enumerate(modes.items()):
            cm = stack.litellm_proxy(work, up.url, hook=hook, keys=KEYS, name=f"litellm{i}", region="us-test",
                                     env={"HEADROOM_URL": portal, "HEADROOM_GATEWAY_TOKEN": token, **env})  # fmt: skip
            gws[name] = cm.__enter__()
            procs.append(cm)
        bad: list[str] = []
        for gw in gws.values():
            hammer(gw.port, args.clients, 1.0, bad)  # warm: connections, snapshot, scripts, tokenizer
        if bad:
            print("warm-up failed:", bad[:3])
            return 1
        print(f"LiteLLM proxy (1 worker) before the test upstream, {args.clients} clients, {args.rounds} rounds of "
              f"{args.round_s:.0f} s per proxy, order reversed every round")  # fmt: skip
        totals = interleaved({name: gw.port for name, gw in gws.items()}, clients=args.clients, rounds=args.rounds,
                             round_s=args.round_s, bad=bad)  # fmt: skip
        if totals is None:
            return 1
        ok, _ = verdicts(totals, args.rounds * args.round_s, GOAL)
        print(f"  {load()}")
        return 0 if ok else 1
    finally:
        for cm in reversed(procs):
            cm.__exit__(None, None, None)
        cleanup(gun, prefix, work)


if __name__ == "__main__":
    sys.exit(main())
