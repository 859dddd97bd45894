"""The in-process store's $ accounts (admission.usd): the same rules as lua/usd.lua, one lock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from admission.usd import ACCOUNT_TTL_S, UsdAnswer, UsdHold


@dataclass
class _Account:
    spent: float = 0.0
    holds: dict[str, tuple[float, float]] = field(default_factory=dict)  # rid → ($, expires)
    dies: float = 0.0

    def lapse(self, now: float) -> None:
        """Holds past their expiry are charged at their estimate (their reservation expired)."""
        for rid, (usd, exp) in list(self.holds.items()):
            if exp <= now:
                self.spent += usd
                del self.holds[rid]

    def left(self, limit: float) -> float:
        return limit - self.spent - sum(u for u, _ in self.holds.values())


class MemoryUsd:
    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._acc: dict[str, _Account] = {}

    def _get(self, key: str, now: float) -> _Account:
        a = self._acc.get(key)
        if a is None or a.dies <= now:
            a = self._acc[key] = _Account(dies=now + ACCOUNT_TTL_S)
        a.lapse(now)
        return a

    def hold(self, h: UsdHold) -> UsdAnswer:
        with self._lock:
            now = self.clock()
            accs = [self._get(k, now) for k in h.keys]
            if h.rid in accs[0].holds:
                return UsdAnswer(True, min(a.left(lim) for a, lim in zip(accs, h.limits, strict=True)), replay=True)
            lefts = [a.left(lim) for a, lim in zip(accs, h.limits, strict=True)]
            if any(v - h.usd < 0 for v in lefts):
                return UsdAnswer(False, min(lefts))
            for a in accs:
                a.holds[h.rid] = (h.usd, now + h.ttl_s)
            return UsdAnswer(True, min(lefts) - h.usd)

    def settle(self, keys: tuple[str, ...], rid: str, usd: float | None) -> bool:
        """Charge the hold `usd` (None: its estimate) or release it (0.0); False: no such hold."""
        with self._lock:
            now = self.clock()
            found = False
            for k in keys:
                a = self._acc.get(k)
                if a is None:
                    continue
                a.lapse(now)
                got = a.holds.pop(rid, None)
                if got is not None:
                    a.spent += got[0] if usd is None else usd
                    found = True
            return found

    def spent(self, key: str) -> tuple[float, float] | None:
        """(charged, held) of an account; None: none this month."""
        with self._lock:
            a = self._acc.get(key)
            if a is None:
                return None
            a.lapse(self.clock())
            return a.spent, sum(u for u, _ in a.holds.values())
