"""A scope's history from rollups that keep each bucket's arrival profile and cost histogram (issue 45,
docs/planning.md "Past retention").

A rollup keeps counts and sums, not single requests. Spread evenly over its minute at its mean cost, a
minute loses the two things a token bucket throttles on: the bursts inside the minute (the bucket drains
in seconds) and the spread of request costs (a nearly empty bucket still admits the small ones). So each
rollup row also counts its requests per 3 s slot of the minute and its estimated wt in log-spaced bins,
and this module turns those back into requests:

- arrivals: each slot's count spread evenly over the slot (a row without a profile, or whose profile
  does not count every request of the row, e.g. rows written before it was kept or an hour row: evenly
  over the bucket);
- costs: the row's histogram, each request at its bin's geometric middle, all scaled so the row's total
  is exact; assigned to the row's arrivals in a fixed pseudo-random order (seeded: the same rows give the
  same replay). A row whose histogram does not count every request: its mean cost.

Measured against the raw events on the public traces (tests/forecasting/test_rollup_replay.py,
docs/planning.md): at the planning answer the replays agree within 0.1 percentage points; the answer is
13.4 CU for the conversation trace's 13.5 and 13.4 for the coding trace's 13.8 (evenly spread: 11.5).
Below the answer it reads low (3.23 % for 3.70 % at 10.8 CU on the conversation trace): which cost came
with which arrival is not kept, and a fixed shuffle pairs them more evenly than real traffic does.
Past `MAX_HISTORY_REQUESTS` each slot's requests are bundled
(capacity.planning_workload.bucket_workload's rule: can only ask more CU) at the slot's mean cost.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from capacity.planning import Workload
from capacity.planning_workload import MAX_HISTORY_REQUESTS

IntArray = npt.NDArray[np.int64]


def bin_middles(edges: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Each bin's geometric middle: bin 0 [edge0 / ratio, edge0), bin k [edge k−1, edge k), the last
    [edge −1, edge −1 × ratio), for log-spaced edges of one ratio."""
    e = np.asarray(edges, dtype=np.float64)
    ratio = e[1] / e[0]
    lo = np.r_[e[0] / ratio, e]
    hi = np.r_[e, e[-1] * ratio]
    middles: npt.NDArray[np.float64] = np.sqrt(lo * hi)
    return middles


def profile_workload(
    start_s: npt.ArrayLike,
    requests: npt.ArrayLike,
    wt: npt.ArrayLike,
    slots: npt.ArrayLike,
    bins: npt.ArrayLike,
    *,
    middles: npt.ArrayLike,
    width_s: float = 60.0,
    name: str,
) -> Workload:
    """Rollup rows (bucket start from the window's origin, requests, summed wt, per-slot counts (rows × S),
    wt histogram (rows × B)) as requests (module docstring). `width_s` 60: minute rows, whose slots
    span the minute; any other width spreads evenly over the bucket."""
    start = np.asarray(start_s, dtype=np.float64)
    count = np.asarray(requests, dtype=np.int64)
    total = np.asarray(wt, dtype=np.float64)
    slot_n = np.asarray(slots, dtype=np.int64).reshape(len(start), -1)
    bin_n = np.asarray(bins, dtype=np.int64).reshape(len(start), -1)
    keep = count > 0
    start, count, total, slot_n, bin_n = start[keep], count[keep], total[keep], slot_n[keep], bin_n[keep]
    recorded = int(count.sum())
    bundle = max(1, math.ceil(recorded / MAX_HISTORY_REQUESTS))
    n_slots = slot_n.shape[1]
    profiled = (slot_n.sum(axis=1) == count) if width_s == 60.0 else np.zeros(len(count), dtype=bool)
    # Per row, its "cells": the slots of a profiled row, one cell of the whole bucket otherwise.
    cell_n = np.where(profiled[:, None], slot_n, 0)
    cell_n[~profiled, 0] = count[~profiled]
    cell_w = np.where(profiled, width_s / n_slots, width_s)
    if bundle > 1:
        cell_n = np.ceil(cell_n / bundle).astype(np.int64)
    per_row = cell_n.sum(axis=1)
    flat = cell_n.ravel()
    n = int(flat.sum())
    row_of_cell = np.repeat(np.arange(len(count)), n_slots)
    cell_start = start[row_of_cell] + np.tile(np.arange(n_slots), len(count)) * cell_w[row_of_cell]
    offsets = np.arange(n) - np.repeat(np.cumsum(flat) - flat, flat)
    row = np.repeat(row_of_cell, flat)
    t = np.repeat(cell_start, flat) + (offsets + 0.5) * cell_w[row] / np.repeat(np.maximum(flat, 1), flat)
    cost = _costs(count, total, bin_n, per_row, np.asarray(middles, dtype=np.float64), bundle > 1)
    by_time = np.argsort(t, kind="stable")
    unit = "minute rows" if width_s == 60.0 else "rows"
    shape = (
        f"each minute's requests at their 3 s arrival slots and their costs from the minute's wt histogram"
        f" ({int(profiled.sum()):,} of {len(count):,} {unit} with a profile; the rest spread evenly)"
    )
    bundled = (
        f"; replayed as {n:,} requests, each standing for up to {bundle:,} at their slot's mean cost"
        if bundle > 1
        else ""
    )
    return Workload(t[by_time], cost[by_time], f"{name}: {recorded:,} recorded reservations, {shape}{bundled}")


def _costs(
    count: IntArray,
    total: npt.NDArray[np.float64],
    bin_n: IntArray,
    per_row: IntArray,
    middles: npt.NDArray[np.float64],
    bundled: bool,
) -> npt.NDArray[np.float64]:
    """Each replayed request's cost, rows in order, each row's requests in a fixed shuffled order."""
    mean = np.repeat(total / np.maximum(per_row, 1), per_row)
    histogram = (bin_n.sum(axis=1) == count) & (not bundled)
    if not histogram.any():
        return mean
    picked = np.where(histogram[:, None], bin_n, 0)
    flat = picked.ravel()
    values = np.repeat(np.tile(middles[: bin_n.shape[1]], len(count)), flat)
    row = np.repeat(np.repeat(np.arange(len(count)), bin_n.shape[1]), flat)
    scale = total / np.maximum(np.bincount(row, weights=values, minlength=len(count)), 1e-300)
    values = values * scale[row]
    # A fixed shuffle within each row: which slot a cost lands in is not kept, so no order is favoured.
    shuffled = np.lexsort((np.random.default_rng(45).random(len(values)), row))
    values = values[shuffled]
    out = mean.copy()
    at = np.repeat(histogram, per_row)
    out[at] = values
    return out
