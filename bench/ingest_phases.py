"""Where ingest's time goes: wall time, server CPU and this thread's CPU per phase of
telemetry.services.ingest_events (envelopes, validation + stage COPY, the move statement, the minute
upsert, the fold), per 1,000 events, on bench/ingest.py's events, printed with the load.

Run: DATABASE_URL=postgres://postgres@127.0.0.1:5432/telemetry_bench .venv/bin/python bench/ingest_phases.py [N] [BATCH] [ROUNDS]
To compare two checkouts, run it from each in turn (alternating): it times whatever telemetry/ it imports.
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bench.ingest as base  # noqa: E402 - after the path

Acc = collections.defaultdict[str, list[float]]


@contextlib.contextmanager
def _timed(acc: Acc, label: str) -> Iterator[None]:
    wall, server, own = time.perf_counter(), base._backend_cpu(), time.thread_time()
    try:
        yield
    finally:
        x = acc[label]
        x[0] += time.perf_counter() - wall
        x[1] += base._backend_cpu() - server
        x[2] += time.thread_time() - own


def _wrap(acc: Acc, module: Any, name: str, label: str) -> None:
    inner: Callable[..., Any] = getattr(module, name)

    def timed(*a: Any, **kw: Any) -> Any:
        with _timed(acc, label):
            return inner(*a, **kw)

    setattr(module, name, timed)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    base.setup_django()
    base.catalogue()
    import telemetry.ingest as ingest

    acc: Acc = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    stage_copy = ingest.stage_copy

    @contextlib.contextmanager
    def staged(*a: Any, **kw: Any) -> Iterator[Any]:
        with _timed(acc, "validation + stage COPY"), stage_copy(*a, **kw) as stage:
            yield stage

    ingest.stage_copy = staged  # type: ignore[assignment]
    for name, label in (("envelopes_for", "envelopes"), ("move_staged", "move"), ("add_minutes", "minute upsert")):
        _wrap(acc, ingest, name, label)
    _wrap(acc, ingest, "fold_if_due", "fold")
    for _ in range(rounds):
        base.reset()
        base.quiesce()
        acc.clear()
        pending = list(base.batches(n, size))
        with _timed(acc, "all (CPU: every thread)"):
            process = time.process_time()
            for b in pending:
                ingest.ingest_events(source="bench", events=b)
            process = time.process_time() - process
        acc["all (CPU: every thread)"][2] += process - acc["all (CPU: every thread)"][2]
        print(f"load {os.getloadavg()[0]:.2f}; per 1,000 events: wall / server CPU / Python CPU, ms")
        for label, (wall, server, own) in acc.items():
            print(f"  {label:26s} {1e6 * wall / n:6.2f} {1e6 * server / n:6.2f} {1e6 * own / n:6.2f}", flush=True)
    base.restore()


if __name__ == "__main__":
    main()
