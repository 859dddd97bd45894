"""Events → additive minute rollups: ingest adds them to the minute table (hours and days are folded
from it, telemetry.fold); backfills add them to all three levels at once.

Works on columns (telemetry.columns): each event's key becomes a small integer once, and every
sum is a numpy bincount over those integers rather than a Python `+=` per event.
"""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

import numpy as np

from telemetry.columns import Columns, none_as, rows_to_columns
from telemetry.envelopes import Envelopes, envelopes_of_rows
from telemetry.fold import note_hours
from telemetry.histogram import EDGES_MS, N_BINS
from telemetry.models import (
    ARRIVAL_SLOT_S,
    ARRIVAL_SLOTS,
    MIN_REV_BASE,
    ROLLUP_ADDITIVE,
    ROLLUP_KEY,
    ROLLUP_MAX,
    ROLLUP_SOURCE_KINDS,
    ROLLUP_SOURCES,
    DayRollup,
    HourRollup,
    MinuteRollup,
)
from telemetry.sql import upsert_add
from telemetry.validation import NOT_SERVED

_TTFT0 = ROLLUP_ADDITIVE.index("ttft_b00")
_E2E0 = ROLLUP_ADDITIVE.index("e2e_b00")
_WIDTH = len(ROLLUP_ADDITIVE)  # values past it (ROLLUP_MAX) merge by the larger, not by addition
_SOURCES0 = ROLLUP_ADDITIVE.index(ROLLUP_SOURCES[0])
assert ROLLUP_ADDITIVE[_SOURCES0:] == ROLLUP_SOURCES  # noqa: S101 - minute_deltas appends them last
assert tuple(f"{p}_{v}" for p in ROLLUP_SOURCE_KINDS for v in ("requests", "wt")) == ROLLUP_SOURCES  # noqa: S101
EDGES = np.array(EDGES_MS, dtype=np.float64)
assert _E2E0 == _TTFT0 + N_BINS  # noqa: S101 - the bin columns are laid out back to back
assert ROLLUP_ADDITIVE.index("olen_b00") == ROLLUP_ADDITIVE.index("plen_b00") + N_BINS == _E2E0 + 2 * N_BINS  # noqa: S101
# minute_deltas appends the arrival slots and the wt bins right after the outcomes, in that order
assert ROLLUP_ADDITIVE.index(ARRIVAL_SLOTS[0]) == ROLLUP_ADDITIVE.index("status_expired") + 1  # noqa: S101
assert ROLLUP_ADDITIVE.index("wt_b00") == ROLLUP_ADDITIVE.index(ARRIVAL_SLOTS[-1]) + 1  # noqa: S101

Key = tuple[Any, ...]  # ROLLUP_KEY order


def _truncate(ts: datetime, level: str) -> datetime:
    if level == "minute":
        return ts.replace(second=0, microsecond=0)
    if level == "hour":
        return ts.replace(minute=0, second=0, microsecond=0)
    return ts.replace(hour=0, minute=0, second=0, microsecond=0)


def _entitlement_keys(col: list[Any]) -> list[str]:
    as_str = {e: str(e) if e else "" for e in set(col)}  # a batch names few entitlements: format each once
    return list(map(as_str.__getitem__, col))


def _floats(col: list[Any]) -> np.ndarray:
    return np.array(none_as(col, 0.0), dtype=np.float64)


class _Column:
    """One numeric column converted to numpy once (None as 0) with which events carry a value (None: all),
    for the several sums, histograms and maxima that read it."""

    def __init__(self, values: list[Any], dtype: type) -> None:
        holes = None in values  # one C-level scan
        self.present: np.ndarray | None = (
            np.fromiter(map(operator.is_not, values, repeat(None)), dtype=np.bool_, count=len(values))
            if holes
            else None
        )
        self.values: np.ndarray = np.array(none_as(values, 0) if holes else values, dtype=dtype)


def _counts(ids: np.ndarray, weights: np.ndarray | None, m: int) -> np.ndarray:
    """Per-key sums of whole numbers (exact: float64 holds integers up to 2**53)."""
    return np.rint(np.bincount(ids, weights=weights, minlength=m)).astype(np.int64)


def _histogram(ids: np.ndarray, values: np.ndarray, present: np.ndarray | None, m: int) -> np.ndarray:
    """Per-key counts of `values` (where `present`: None, all) in the log-spaced bins: an (m, N_BINS) array."""
    cells = ids * N_BINS + np.searchsorted(EDGES, values.astype(np.float64, copy=False), side="right")
    if present is not None:
        cells = cells[present]
    return np.bincount(cells, minlength=m * N_BINS).reshape(m, N_BINS)


def _maxima(ids: np.ndarray, values: np.ndarray, m: int) -> list[int]:
    out = np.zeros(m, dtype=np.int64)
    np.maximum.at(out, ids, values)
    return out.tolist()


def _is(values: list[Any], what: Any) -> np.ndarray:
    """Per event, whether its value is `what` (identity: True, None), as a bool array, in one C-level pass."""
    return np.fromiter(map(operator.is_, values, repeat(what)), dtype=np.bool_, count=len(values))


def _equals(values: list[Any], what: str) -> np.ndarray:
    return np.fromiter(map(operator.eq, values, repeat(what)), dtype=np.bool_, count=len(values))


def _outcomes(cols: Columns, ents: list[str], envelopes: Envelopes | None) -> tuple[list[np.ndarray], np.ndarray]:
    """Per event, 0/1 columns in ROLLUP_OUTCOMES order (the SLO ones of served completions reporting
    slo_met, by envelope; then the not-served completions by status), and whether it counts as served
    for slo_met / slo_total (a bool array). `envelopes` None: the caller knew of none, so no SLO outcome
    is classified (the statement counts those misses as unclassified). Boolean arrays, each one C-level
    pass over a column: a batch without completions skips them all."""
    n = len(ents)
    status, decision, slo = cols["status"], cols["decision"], cols["slo_met"]
    if "complete" not in decision:
        zero = np.zeros(n, dtype=np.bool_)
        return [zero] * (4 + len(NOT_SERVED)), zero
    done = _equals(decision, "complete")
    failed = [done & _equals(status, bad) if bad in status else np.zeros(n, dtype=np.bool_) for bad in NOT_SERVED]
    served = done & ~np.logical_or.reduce(failed)
    reported = served & ~_is(slo, None)
    met = _is(slo, True)
    missed = _is(slo, False)
    inside = np.zeros(n, dtype=np.bool_)
    if envelopes is not None:
        capped = cols.get("capped") or [False] * n
        for i in np.flatnonzero(reported).tolist():
            scope = (
                cols["tenant"][i],
                cols["project"][i],
                cols["model"][i],
                cols["region"][i],
                cols["traffic_class"][i],
            )
            inside[i] = envelopes.inside(
                ents[i],
                scope,
                cols["prompt_tokens"][i],
                cols["output_tokens"][i],
                bool(capped[i]),
                cols["source_kind"][i],
            )
    else:
        reported_known = np.zeros(n, dtype=np.bool_)
        return [reported_known] * 4 + failed, reported
    outside = ~inside
    cells = [reported & inside & met, reported & inside & missed, reported & outside & met, reported & outside & missed]
    return cells + failed, reported


def _sources(cols: Columns, ids: np.ndarray, m: int, actual: np.ndarray) -> tuple[list[list[int]], list[list[float]]]:
    """Per key and ROLLUP_SOURCE_KINDS kind, the events of that source_kind and their settled wt: one
    bincount per column, as every other sum."""
    kinds = cols["source_kind"]
    counts, wts = [], []
    for kind in ROLLUP_SOURCE_KINDS.values():
        if kind not in kinds:  # most batches hold neither kind: a C-level scan, no per-event mask
            counts.append([0] * m)
            wts.append([0.0] * m)
            continue
        mask = np.fromiter((k == kind for k in kinds), dtype=np.float64, count=len(kinds))
        counts.append(_counts(ids, mask, m).tolist())
        wts.append(np.bincount(ids, weights=mask * actual, minlength=m).tolist())
    return counts, wts


def minute_deltas(cols: Columns, envelopes: Envelopes | None = None) -> dict[Key, list]:
    """Rollup values (ROLLUP_VALUES order: the additive ones, then the maxima) per minute key
    (ROLLUP_KEY order). `envelopes`: what each settled request is judged against (telemetry.envelopes).

    Each event's key becomes a small integer once (two C-level dict passes), each numeric column a numpy
    array once, and every sum and histogram is then one numpy bincount over those integers."""
    n = len(cols["ts"])
    if not n:
        return {}
    stamps = np.fromiter(map(datetime.timestamp, cols["ts"]), dtype=np.float64, count=n)
    minutes = (stamps // 60).astype(np.int64).tolist()
    ents = _entitlement_keys(cols["entitlement"])
    keys = list(
        zip(
            minutes,
            cols["tenant"],
            cols["project"],
            cols["model"],
            cols["region"],
            cols["traffic_class"],
            ents,
            cols["decision"],
            cols["reason"],
            # rows built before the field existed carry none
            none_as(cols.get("served_from") or [None] * n, ""),
            strict=True,
        )
    )
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    ids = np.array(list(map(index.__getitem__, keys)), dtype=np.intp)
    m = len(index)
    outcomes, reported = _outcomes(cols, ents, envelopes)
    prompt, output = _Column(cols["prompt_tokens"], np.int64), _Column(cols["output_tokens"], np.int64)
    estimated_wt = _Column(cols["estimated_wt"], np.float64)
    ints = [
        _counts(ids, None, m),
        _counts(ids, prompt.values.astype(np.float64), m),
        _counts(ids, np.array(cols["cached_prompt_tokens"], dtype=np.float64), m),
        _counts(ids, output.values.astype(np.float64), m),
        # latency attainment counts served completions only (issue 33: an errored one is shown apart)
        np.bincount(ids[reported & _is(cols["slo_met"], True)], minlength=m),
        np.bincount(ids[reported], minlength=m),
    ]
    latencies = [_Column(cols[name], np.float64) for name in ("ttft_ms", "e2e_ms")]
    ints.extend(_histogram(ids, c.values, c.present, m) for c in (*latencies, prompt, output))
    ints.extend(np.bincount(ids[c], minlength=m) for c in outcomes)
    # The sub-minute arrival profile and the cost histogram (telemetry.models.ARRIVAL_SLOTS, WT_BINS).
    slot = ((stamps % 60.0) // ARRIVAL_SLOT_S).astype(np.intp).clip(0, len(ARRIVAL_SLOTS) - 1)
    ints.append(np.bincount(ids * len(ARRIVAL_SLOTS) + slot, minlength=m * len(ARRIVAL_SLOTS)).reshape(m, -1))
    ints.append(_histogram(ids, estimated_wt.values, None, m))  # a missing estimate counts as 0
    table = np.column_stack(ints).tolist()
    in_flight = _Column(cols.get("in_flight") or [None] * n, np.int64)  # rows built before it carry none
    maxima = [_maxima(ids, c.values, m) for c in (prompt, output, in_flight)]
    maxima += [_maxima(ids, MIN_REV_BASE - c.values, m) for c in (prompt, output)]  # ROLLUP_MAX: the shortest
    estimated = np.bincount(ids, weights=estimated_wt.values, minlength=m).tolist()
    actual_wt = _floats(cols["actual_wt"])
    actual = np.bincount(ids, weights=actual_wt, minlength=m).tolist()
    kind_n, kind_wt = _sources(cols, ids, m, actual_wt)
    buckets = {t: datetime.fromtimestamp(t * 60, UTC) for t in set(minutes)}
    out: dict[Key, list] = {}
    for k, i in index.items():
        row = table[i]
        sources = [v for n, wt in zip(kind_n, kind_wt, strict=True) for v in (n[i], wt[i])]
        out[(buckets[k[0]], *k[1:])] = [row[0], estimated[i], actual[i], *row[1:], *sources, *(mx[i] for mx in maxima)]
    return out


def coarsen(deltas: dict[Key, list], level: str) -> dict[Key, list]:
    out: dict[Key, list] = {}
    for key, vals in deltas.items():
        k = (_truncate(key[0], level), *key[1:])
        acc = out.get(k)
        if acc is None:
            out[k] = list(vals)
        else:
            for i, v in enumerate(vals):
                acc[i] = acc[i] + v if i < _WIDTH else max(acc[i], v)
    return out


def add_minutes(minute: dict[Key, list]) -> None:
    """Add minute_deltas to the minute rollups and note their hours for the next fold (telemetry.fold),
    in the caller's transaction. Ingest's path: one rollup level written per batch, not three."""
    if not minute:
        return
    # sorted: every writer takes the rollup rows' locks in one order
    upsert_add(MinuteRollup, ROLLUP_KEY, ROLLUP_ADDITIVE, [[*k, *minute[k]] for k in sorted(minute)], ROLLUP_MAX)
    note_hours({k[0] for k in minute})


def add_deltas(minute: dict[Key, list], *, with_minutes: bool = True) -> None:
    """Add minute_deltas to the hour and day rollups (and the minute ones unless told not to) at once,
    in the caller's transaction: backfills (demo.history)."""
    levels = [(HourRollup, coarsen(minute, "hour")), (DayRollup, coarsen(minute, "day"))]
    if with_minutes:
        levels.insert(0, (MinuteRollup, minute))
    for model, deltas in levels:
        upsert_add(model, ROLLUP_KEY, ROLLUP_ADDITIVE, [[*k, *deltas[k]] for k in sorted(deltas)], ROLLUP_MAX)


def rollups_add(rows: list[dict[str, Any]], *, with_minutes: bool = True) -> None:
    """Add cleaned event rows (dicts with clean_event's fields) to the rollups."""
    if rows:
        add_deltas(minute_deltas(rows_to_columns(rows), envelopes_of_rows(rows)), with_minutes=with_minutes)
