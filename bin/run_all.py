"""`make run`: the web app plus, when present, the fleet simulator, stopped together on Ctrl-C."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", default="8000")
    args = ap.parse_args()
    py = sys.executable
    procs = [subprocess.Popen([py, "manage.py", "runserver", "--noreload", f"{args.host}:{args.port}"], cwd=ROOT)]
    # No beat in the embedded default: evaluate alert rules (and send due webhook retries) every minute.
    procs.append(subprocess.Popen([py, "manage.py", "evaluate_alerts", "--every", "60"], cwd=ROOT))
    if os.environ.get("HEADROOM_SIMULATE", "1") == "1":
        time.sleep(2)
        procs.append(
            subprocess.Popen(
                [
                    py,
                    "manage.py",
                    "simulate_fleet",
                    "--base-url",
                    f"http://{args.host}:{args.port}",
                    "--load",
                    "0.9",
                    "--spike-at-minute",
                    "10",
                ],
                cwd=ROOT,
            )
        )
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
