"""Fair share among a pool's borrowers (issues 36.3 and 48.3, docs/lending.md), one rule for both stores.

A pool's fair-share table holds one entry per borrowing scope: its borrowed tokens in the window (each
token counts e^(−age / window)), when the entry was written, its weight, until when it is active (a
borrowed attempt keeps it so for `active_s`), and what its own borrowing limit let it take then: its
borrow bucket's level after the attempt, that bucket's rate and depth, and the cost it asked. A
borrower counts as active only while it could take room: its entry is recent AND its own borrow bucket,
refilled to now, holds the cost it last asked (issue 48.3: a borrower held back by its own limit was
counted as active and kept room idle for it). The rule (`fair_ok`) refuses a borrower only when it
holds more than its weight's share of the contended room AND the room it would take is needed by
more-deserving active borrowers (those holding less per weight), each counted for at most what it is
owed and what its own limit lets it take. Mirrored line for line in lua/reserve.lua (fair_read, fair_ok).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

# A fair-share entry no longer active and whose borrowed tokens decayed below this (wt) is dropped.
FAIR_FORGET_WT = 1e-3


def decayed(used: float, at: float, now: float, window_s: float) -> float:
    """Borrowed tokens written at `at`, as they count at `now` (each decays by e^(−age / window)).
    Mirrored by `decayed` in lua/reserve.lua."""
    return used * math.exp(-(now - at) / window_s) if now > at else used


def can_take(entry: Sequence[float], now: float) -> float:
    """What an entry's own borrowing limit lets it take at `now`: its borrow bucket refilled since the
    entry was written (an entry without those fields, written by an older script: unlimited)."""
    if len(entry) < 8:
        return math.inf
    _, at, _, _, level, rate, depth, _ = entry[:8]
    return min(depth, level + rate * max(0.0, now - at))


def active(entry: Sequence[float], now: float) -> bool:
    """The entry counts as an active borrower: attempted within `active_s` and its own borrowing limit
    would let it take what it last asked."""
    return entry[3] > now and (len(entry) < 8 or can_take(entry, now) >= entry[7])


def fair_ok(mine: float, weight: float, pie: float, weights: float, room: float, cost: float,
            others: Iterable[tuple[float, float, float]]) -> bool:  # fmt: skip
    """`mine` this scope's borrowed tokens in the window (decayed to now), `weight` its weight, `pie` what
    the active borrowers (this one included) hold plus `room`, the lendable room left now, `weights`
    their weights together, `others` (held, weight, can take) of each other active borrower. Within its
    share it is admitted; beyond it, only while what it takes leaves the more-deserving borrowers what
    they are owed (their share less what they hold, at most what their own limits let them take)."""
    if mine * weights <= pie * weight:
        return True
    need = 0.0
    for held, w, cap in others:
        if held * weight < mine * w:  # holds less per weight than this one: more deserving
            need += min(max(0.0, w * pie / weights - held), cap)
    return room - cost >= need


def settled_entry(entry: list[float], back: float, delta: float, at: float, now: float, window_s: float) -> list[float]:
    """A borrower's entry after one of its borrowed reservations (made at `at`) settled: its count less
    `back` as it would have counted had it been the estimate at reserve (decayed since), never below 0;
    its borrow bucket's level refilled to now and settled by `delta` as the bucket itself is. Mirrored
    in lua/complete.lua."""
    out = list(entry)
    out[0] = max(0.0, decayed(entry[0], entry[1], now, window_s) - decayed(back, at, now, window_s))
    out[1] = now
    if len(entry) >= 8:
        level, depth = can_take(entry, now), entry[6]
        out[4] = max(-depth, min(depth, level + delta))
    return out
