"""The circuit breaker between the serving path and Redis (docs/contract.md §5, issue 12.1).

Fail open only when the store is down, never because one answer was slow. Closed: every call goes
to Redis and waits up to the client timeout; a call that errs counts one failure, any success
resets the count. `threshold` consecutive failures (or one failed health probe) open the breaker:
calls then fail fast into the class's fail mode without touching Redis, and at most one caller
per `probe_every_s` sends a PING (the probe); a successful probe closes the breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Breaker:
    def __init__(self, probe: Callable[[], bool], *, threshold: int = 5, probe_every_s: float = 0.5) -> None:
        self._probe = probe
        self.threshold, self.probe_every_s = threshold, probe_every_s
        self._lock = threading.Lock()
        self._probing = threading.Lock()
        self.failures = 0  # consecutive
        self.opened_at: float | None = None
        self._next_probe = 0.0
        self.counts = {"opened": 0, "closed": 0, "probes": 0, "fast_fails": 0}

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
            self._open()

    def _open(self) -> None:
        with self._lock:
            if self.opened_at is None:
                self.opened_at = time.monotonic()
                self._next_probe = self.opened_at + self.probe_every_s
                self.counts["opened"] += 1
