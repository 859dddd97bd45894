"""Ctrl-C stops the suite (issue 28.2). pytest turns the first SIGINT into KeyboardInterrupt and runs
teardown; a fixture that waits on a server, a thread that is not a daemon, or an xdist worker stuck in
one of those kept the run alive through two Ctrl-C. Here the first interrupt arms a watchdog: if the
process is still alive GRACE_S later it ends its child processes and exits 130. A second Ctrl-C does
that at once."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

GRACE_S = 10.0
EXIT_INTERRUPTED = 130


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, read from /proc (no psutil in the test stack)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            # The command name may hold spaces or parentheses: the fields after the last ')' are fixed.
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def end_now() -> None:
    procs = descendants(os.getpid())
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        if sig == signal.SIGTERM and procs:
            time.sleep(1.0)
    os._exit(EXIT_INTERRUPTED)


def install() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    interrupts: list[float] = []

    def watchdog() -> None:
        time.sleep(GRACE_S)
        end_now()

    def on_sigint(signum: int, frame: object) -> None:
        interrupts.append(time.monotonic())
        if len(interrupts) >= 2:
            end_now()
        threading.Thread(target=watchdog, name="ctrl-c-watchdog", daemon=True).start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
