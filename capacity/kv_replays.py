"""KV replays of one class shared between its sizings (moved out of capacity/sizing.py)."""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from capacity.kv_demand import KvDemand, rate_free, simulate_class
from capacity.sizing_inputs import SizingInput


class KvReplays:
    """KV simulations of one class, by latencies (and rate, where the replay depends on it): points
    with the same TTFT and TPOT replay the same requests; the peak's extra cost re-sizes the chosen
    point at a trace's mean rate, and the calculator sizes the class at each planning basis — a trace
    at its own timing replays identically at any rate, so each point is simulated once for them all.

    One object serves inputs that differ at most in `arrival_rate_rps`: any other field (its arrays
    by identity) differing from the first input's is a ValueError, since a replay keyed by latencies
    alone would then answer for another class."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[float | None, float, float], KvDemand] = {}
        self._class: SizingInput | None = None

    def get(self, inp: SizingInput, ttft: float, tpot: float) -> KvDemand:
        self._check_class(inp)
        rate = None if inp.arrival_rate_rps > 0 and rate_free(inp) else inp.arrival_rate_rps
        key = (rate, ttft, tpot)
        if key not in self._by_key:
            self._by_key[key] = simulate_class(inp, ttft, tpot)
        return self._by_key[key]

    def _check_class(self, inp: SizingInput) -> None:
        if self._class is None:
            self._class = inp
            return
        for f in fields(inp):
            if f.name == "arrival_rate_rps":
                continue
            mine, theirs = getattr(self._class, f.name), getattr(inp, f.name)
            same = mine is theirs if isinstance(mine, np.ndarray) or isinstance(theirs, np.ndarray) else mine == theirs
            if not same:
                raise ValueError(f"KvReplays: {f.name} differs from the class these replays are for")
