"""The circuit breaker between the serving path and Redis (docs/contract.md §5, issue 12.1).

Fail open only when the store is down, never because one answer was slow. Closed: every call goes
to Redis and waits up to the client timeout; a call that errs counts one failure, any success
resets the count. At `threshold` consecutive failures the caller that reached it asks the store
itself (a PING, the probe): no answer opens the breaker; an answer resets the count, since the store
is up and was only slow. Without that check one stall of the store (or of this machine) longer than
the timeout opened the breaker whenever five callers were waiting at once: their five timeouts are
one event, not five (CI saw 66,928 fail-open decisions in 10 s with Redis up, 16 threads × 2
processes, the slowest answer 524 ms). A failed health probe opens it too. Open: calls fail fast
into the class's fail mode without touching Redis, and at most one caller per `probe_every_s` sends
the probe; a successful probe closes the breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# The check before opening (tests/admission/test_breaker.py takes it out and sees a stall open it).
CONFIRM = True


class Breaker:
    def __init__(self, probe: Callable[[], bool], *, threshold: int = 5, probe_every_s: float = 0.5) -> None:
        self._probe = probe
        self.threshold, self.probe_every_s = threshold, probe_every_s
        self._lock = threading.Lock()
        self._probing = threading.Lock()
        self.failures = 0  # consecutive
        self.opened_at: float | None = None
        self._next_probe = 0.0
        self.counts = {"opened": 0, "closed": 0, "probes": 0, "fast_fails": 0, "slow_not_down": 0}

    @property
    def is_open(self) -> bool:
        return self.opened_at is not None

    def allow(self) -> bool:
        """May this call go to Redis? While open, one caller per interval probes instead; the
        rest fail fast."""
        if self.opened_at is None:
            return True
        now = time.monotonic()
        if now < self._next_probe or not self._probing.acquire(blocking=False):
            self.counts["fast_fails"] += 1
            return False
        try:
            self._next_probe = now + self.probe_every_s
            return self.probe()
        finally:
            self._probing.release()

    def probe(self) -> bool:
        """PING the store: success closes the breaker, failure opens it (a health check may call this)."""
        self.counts["probes"] += 1
        ok = self._probe()
        if ok:
            self.success()
        else:
            self._open()
        return ok

    def success(self) -> None:
        if self.failures or self.opened_at is not None:
            with self._lock:
                self.failures = 0
                if self.opened_at is not None:
                    self.opened_at = None
                    self.counts["closed"] += 1

    def failure(self) -> None:
        with self._lock:
            self.failures += 1
            trip = self.failures >= self.threshold and self.opened_at is None
        if trip:
            self._confirm()

    def _confirm(self) -> None:
        """Open only if the store does not answer a probe. One caller asks; the others' failures
        meanwhile are the same stall, so they neither open it nor wait."""
        if not self._probing.acquire(blocking=False):
            return
        try:
            if not CONFIRM:
                self._open()
                return
            self.counts["probes"] += 1
            if self._probe():
                self.counts["slow_not_down"] += 1
                with self._lock:
                    self.failures = 0
            else:
                self._open()
        finally:
            self._probing.release()

    def _open(self) -> None:
        with self._lock:
            if self.opened_at is None:
                self.opened_at = time.monotonic()
                self._next_probe = self.opened_at + self.probe_every_s
                self.counts["opened"] += 1
