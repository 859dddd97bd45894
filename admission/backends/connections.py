"""A bounded set of Redis connections that threads borrow for one operation and give back.

The hot path used to keep one connection per thread: under a thread-per-request server
(`runserver`, gunicorn's gthread) every short-lived thread made a new one and never gave it back,
until redis-py refused to make more (`MaxConnectionsError`, issue 12.2). Here a thread borrows an
idle connection (LIFO, so the warm ones are reused), and at most `size` exist in a process;
when all are busy a caller waits up to `wait_s` for one. Leaner than redis-py's own pool
checkout (no health poll, no bookkeeping per call): a reserve is about one round trip.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


class Exhausted(Exception):
    """Every connection stayed busy for `wait_s`: this process is saturated (the store may be fine)."""


class BoundedConnections:
    def __init__(self, make: Callable[[], Any], *, size: int, wait_s: float) -> None:
        if size < 1:
            raise ValueError("size must be at least 1")
        self._make, self.size, self.wait_s = make, size, wait_s
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        self._idle: list[Any] = []
        self._slots = threading.BoundedSemaphore(self.size)
        self._made_lock = threading.Lock()
        self.made = 0  # connections made in this process: never more than `size`

    def acquire(self) -> Any:
        if self._pid != os.getpid():
            self._reset()  # a forked child must not share its parent's sockets
        if not self._slots.acquire(timeout=self.wait_s):
            raise Exhausted(f"all {self.size} admission connections busy for {self.wait_s} s")
        try:
            return self._idle.pop()
        except IndexError:
            pass
        try:
            with self._made_lock:
                self.made += 1
            return self._make()
        except BaseException:
            self._slots.release()
            raise

    def release(self, conn: Any) -> None:
        if self._pid != os.getpid():
            return  # borrowed before a fork: the parent's socket stays the parent's
        self._idle.append(conn)
        self._slots.release()

    def disconnect_all(self) -> None:
        for conn in list(self._idle):
            conn.disconnect()
