"""The in-process backend's lending and fair-share accounts (reserve.lua's and complete.lua's twins,
issue 36.3): the lend / keep-back charge of an own admission, the fair-share table's read, entry and
settle. A mixin of MemoryBackend: every method runs under the operation's lock, on its store.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from admission.backends import fair, inputs
from admission.backends.base import FAIR_FORGET_WT, Lends, ReserveOp, bounded, decayed, lender_split
from admission.backends.memory_store import _Store


class FairLedger:
    """The lend buckets and fair-share tables of MemoryBackend's store (`_s`), read at its clock."""

    _s: _Store
    _lock: threading.Lock
    clock: Callable[[], float]
    _level: Callable[[str, float, float, float], float]  # MemoryBackend's: a bucket's level refilled to now

    def _lender_charge(self, ln: Lends, cost: float, now: float) -> tuple[tuple[str, float, float, float], ...]:
        """An own admission's charge to the lend bucket (reserve.lua's twin): the keep-back pays first;
        never a refusal, the lend bucket's debt bounded at one depth. → what each bucket was charged."""
        out: tuple[tuple[str, float, float, float], ...] = ()
        x, kb, lend = 0.0, ln.keep, ln.lend
        if kb is not None:
            keep_l = self._level(kb.key, kb.rate, kb.depth, now)
            x = lender_split(cost, keep_l)
            self._s.buckets[kb.key] = (keep_l - x, now)
            out = ((kb.key, kb.rate, kb.depth, x),)
        lend_l = self._level(lend.key, lend.rate, lend.depth, now)
        self._s.buckets[lend.key] = (bounded(lend_l - (cost - x), lend.depth), now)
        return (*out, (lend.key, lend.rate, lend.depth, cost - x))

    def _fair_settle(self, rec: tuple[str, str, float, float, float, float], back: float, delta: float,
                     now: float) -> None:  # fmt: skip
        """Settle a borrowed reservation in the fair-share table (complete.lua's twin, fair.settled_entry):
        `back` its count's share of the difference, `delta` the borrow bucket's."""
        fk, member, weight, window, _, at = rec
        table = self._s.fair.setdefault(fk, {})
        entry = table.get(member, [0.0, now, weight, now])
        table[member] = fair.settled_entry(entry, back, delta, at, now, window)

    def _fair_read(self, op: ReserveOp, now: float) -> tuple[float, float, float, list[tuple[float, float, float]]]:
        """(this scope's borrowed tokens in the window, the active borrowers' together, their weights
        together, (held, weight, can take) of each other active one), this scope counted as active
        (fair.active); entries neither active nor borrowing are dropped (reserve.lua's fair_read)."""
        sh = op.scope.share
        assert sh is not None
        v = inputs.of(op.scope)
        window = v["window_s"]
        table = self._s.fair.get(sh.fair, {})
        mine, used, weights = 0.0, 0.0, v["weight"]
        others: list[tuple[float, float, float]] = []
        for member, f in list(table.items()):
            got = decayed(f[0], f[1], now, window)
            if member == v["member"]:
                mine = got
                used += got
            elif fair.active(f, now):
                used += got
                weights += f[2]
                others.append((got, f[2], fair.can_take(f, now)))
            elif f[3] <= now and got < FAIR_FORGET_WT:
                del table[member]
        return mine, used, weights, others

    def _fair_entry(self, op: ReserveOp, now: float, bor_l: float, add: float = 0.0) -> None:
        """Write this scope's entry: its borrowed tokens decayed to now plus `add`, active for active_s more,
        and its borrow bucket after this attempt (`bor_l`) with that bucket's rate, depth and this cost."""
        if op.scope.share is None:
            return
        v = inputs.of(op.scope)
        table = self._s.fair.setdefault(op.scope.share.fair, {})
        got = table.get(v["member"])
        u = decayed(got[0], got[1], now, v["window_s"]) if got is not None else 0.0
        table[v["member"]] = [u + add, now, v["weight"], now + v["active_s"], bor_l, v["borrow_rate"],
                              v["borrow_depth"], op.cost]  # fmt: skip

    def fair_state(self, fair_key: str, window_s: float) -> dict[str, tuple[float, float, bool]]:
        """A pool's fair-share table now: member → (borrowed wt in the window, weight, active: fair.active)."""
        with self._lock:
            now = self.clock()
            return {m: (decayed(f[0], f[1], now, window_s), f[2], fair.active(f, now))
                    for m, f in self._s.fair.get(fair_key, {}).items()}  # fmt: skip
