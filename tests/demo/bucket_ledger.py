"""What a token bucket of the live server's admission store gave out, read from the store itself.

In-process store (admission.backends.memory, the embedded default): `record` wraps the store's bucket map so
every write to the named keys is kept, (level, when) by the store's own clock, in order; `Ledger.entries`
then says what each write took, the level the store's own refill rule (capacity.bucket.refilled, the rule
the backend reads with) had brought the bucket to just before it, less the level written. A charge takes
its cost; a settlement gives its refund back, bounded at the depth as the store bounds it (admission.
backends.base.bounded). Test code only: the backend is not changed, only watched.

Redis: the scripts keep no history, so only the last state is there (`bucket_state`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from admission.backends.memory import MemoryBackend
from capacity.bucket import refilled


class _Recording(dict):
    """The store's bucket map, keeping every write to `watched` keys (dict's own storage stays the store's)."""

    def __init__(self, data: dict, watched: set[str]) -> None:
        super().__init__(data)
        self.watched = watched
        self.writes: dict[str, list[tuple[float, float]]] = {k: [] for k in watched}

    def __setitem__(self, key: str, value: tuple[float, float]) -> None:
        if key in self.watched:
            self.writes[key].append(value)
        super().__setitem__(key, value)


@dataclass
class Entry:
    at: float
    before: float  # the level just before the write (refilled since the last write, at most the depth)
    after: float  # the level written

    @property
    def taken(self) -> float:
        """What the write took (a settlement's refund is negative)."""
        return self.before - self.after


@dataclass
class Ledger:
    backend: Any
    rates: dict[str, tuple[float, float]]  # key → (rate wt/s, depth wt)
    recording: _Recording | None = None
    started: float = 0.0  # the store's clock when recording began
    start_levels: dict[str, tuple[float, float] | None] = field(default_factory=dict)

    def entries(self, key: str) -> list[Entry]:
        assert self.recording is not None, "only the in-process store keeps its writes"
        rate, depth = self.rates[key]
        prev = self.start_levels[key]
        out = []
        for level, at in self.recording.writes[key]:
            before = depth if prev is None else refilled(prev[0], rate, depth, at - prev[1])
            out.append(Entry(at, before, level))
            prev = (level, at)
        return out

    def state(self, key: str) -> tuple[float, float] | None:
        return self.backend.bucket_state(key)


def store_now(backend: Any) -> float:
    if isinstance(backend, MemoryBackend):
        return backend.clock()
    sec, us = backend.client.time()
    return sec + us / 1e6


def record(backend: Any, rates: dict[str, tuple[float, float]]) -> Ledger:
    """Start watching `rates`' keys on the live server's store (on Redis: note only the start)."""
    ledger = Ledger(backend, rates, started=store_now(backend))
    ledger.start_levels = {k: backend.bucket_state(k) for k in rates}
    if isinstance(backend, MemoryBackend):
        with backend._lock:  # the store's own lock: no write slips between the copy and the swap
            ledger.recording = _Recording(backend._s.buckets, set(rates))
            backend._s.buckets = ledger.recording
    return ledger
