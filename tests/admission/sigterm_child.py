"""Child process for test_shutdown: buffers N events behind a slow sink, then waits for SIGTERM.

argv: output file, N. The sink appends each event id it is given to the file (one line each) and
takes 20 ms per batch of 500, so a SIGTERM lands with most events still buffered.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root, as manage.py has it
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django  # noqa: E402

django.setup()

from admission import events  # noqa: E402


def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2])
    out = open(path, "a", buffering=1)  # noqa: SIM115 - open for the process's life

    def slow_sink(batch: list[dict]) -> dict:
        time.sleep(0.02)
        out.write("".join(e["event_id"] + "\n" for e in batch))
        return {"accepted": len(batch), "duplicates": 0, "errors": []}

    events.set_buffer(events.EventBuffer(slow_sink, bound=10 * n, batch=500, flush_s=0.05))
    events.install_shutdown_flush()  # as events.buffer() does on first use
    for i in range(n):
        events.emit({"event_id": f"e{i}", "decision": "admit"})
    print("emitted", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
