"""Batch validation by column: the same rules as `validation.clean_event`, checked with C-level builtins.

Ingest validates every field of every event; row by row that was most of ingest's Python time. Here a
batch is turned into one list per field and each rule becomes a set or map over a list (`set(col) <=
known`, `all(map(isfinite, col))`). The result is either exactly what `clean_event` gives for every
event, or None: any event this path does not accept — a bad field, an unusual type, a float token
count — sends the batch to the row-by-row validator, which names each bad event's index and field.
tests/telemetry/test_columns.py holds the two to the same answers.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import attrgetter, gt, methodcaller
from typing import Any

from entitlements.reasons import REASONS
from telemetry.validation import CONTROL, DECISIONS, LIMITS, POOL_MAX, SLUG, SOURCE_KINDS, STATUSES, Catalogue

Columns = dict[str, list[Any]]

# The cleaned fields, in the order clean_event returns them.
FIELDS = (
    "event_id",
    "ts",
    "tenant",
    "project",
    "model",
    "region",
    "traffic_class",
    "entitlement",
    "decision",
    "reason",
    "source_kind",
    "estimated_wt",
    "actual_wt",
    "prompt_tokens",
    "cached_prompt_tokens",
    "output_tokens",
    "ttft_ms",
    "e2e_ms",
    "slo_met",
    "status",
    "in_flight",
    "served_from",
)
# Cleaned but not stored on the event row: whether admission capped the settled prompt or output at the
# envelope's maximum (`prompt_capped` / `output_capped` on the event), read by the rollups' per-request
# envelope classification (telemetry.envelopes) only.
TRANSIENT = ("capped",)
CLEANED = FIELDS + TRANSIENT
_NONE = type(None)
_ZERO = timedelta(0)
_UTCOFFSET = methodcaller("utcoffset")
_TZINFO = attrgetter("tzinfo")
_OPTIONAL_CHOICE = frozenset({None, ""})


class _Reject(Exception):
    """The fast path does not vouch for this batch; the row validator decides."""


def _need(ok: bool) -> None:
    if not ok:
        raise _Reject


def column(events: list[dict[str, Any]], key: str) -> list[Any]:
    """One field of every event (each a dict: _fast checks that first), in one C-level pass."""
    return list(map(dict.get, events, repeat(key)))


def _numbers(col: list[Any], key: str, *, integer: bool, required: bool | list[bool] = False) -> list[Any]:
    """A number column: ints (and floats unless `integer`), from 0 to LIMITS[key], finite; None only where
    not `required` (a list says it per event). Float columns come back as floats, None kept."""
    types = set(map(type, col))
    allowed = {int} if integer else {int, float}
    holes = _NONE in types
    if holes:
        _need(required is not True)
        if isinstance(required, list):
            _need(not any(req for v, req in zip(col, required, strict=True) if v is None))
        present = [v for v in col if v is not None]
        types.discard(_NONE)
    else:
        present = col
    _need(types <= allowed)
    if present:
        if float in types:
            _need(all(map(math.isfinite, present)))
        _need(min(present) >= 0 and max(present) <= LIMITS[key])
    if not integer and int in types:
        return [None if v is None else float(v) for v in col] if holes else list(map(float, col))
    return col


def none_as(col: list[Any], zero: Any) -> list[Any]:
    """`col` with None replaced by `zero` (the same list when it holds no None)."""
    return [zero if v is None else v for v in col] if None in col else col


def _timestamps(col: list[Any], cat: Catalogue) -> list[datetime]:
    _need(set(map(type, col)) == {str})
    dts = list(map(datetime.fromisoformat, col))  # ValueError → row path, which names the event
    offsets = set(map(_UTCOFFSET, dts))
    _need(None not in offsets)
    if offsets != {_ZERO}:
        dts = [d.astimezone(UTC) for d in dts]  # OverflowError at the calendar's edge → row path
    elif set(map(_TZINFO, dts)) != {UTC}:  # "+00:00" may parse to a fixed offset that is not UTC itself
        dts = [d.replace(tzinfo=UTC) for d in dts]
    _need(cat.earliest is None or min(dts) >= cat.earliest)
    _need(cat.latest is None or max(dts) <= cat.latest)
    return dts


def _slugs(col: list[Any], known: frozenset[str]) -> list[Any]:
    _need(set(col) <= known)  # known holds only non-empty strings: None, "" and other types fail
    return col


def _entitlements(col: list[Any]) -> list[uuid.UUID | None]:
    distinct = set(col) - _OPTIONAL_CHOICE
    if not distinct:
        return [None] * len(col)
    as_uuid: dict[Any, uuid.UUID | None] = {None: None, "": None}
    for v in distinct:
        _need(not (isinstance(v, str) and CONTROL.search(v)))  # UUID() would take a tab or a newline
        as_uuid[v] = uuid.UUID(str(v))  # ValueError → row path
    return list(map(as_uuid.__getitem__, col))


def _pools(col: list[Any]) -> list[Any]:
    """served_from: absent or a pool slug as the gateway reported it (validation.served_from's rule)."""
    given = set(col) - _OPTIONAL_CHOICE
    if not given:
        return [None] * len(col)
    _need(set(map(type, given)) == {str} and max(map(len, given)) <= POOL_MAX)
    _need(all(map(SLUG.fullmatch, given)))
    return [v or None for v in col]


def _choices(col: list[Any], allowed: frozenset[str]) -> list[str]:
    _need(set(col) <= allowed | _OPTIONAL_CHOICE)
    return none_as(col, "")


def _fast(events: list[Any], cat: Catalogue) -> Columns:
    _need(set(map(type, events)) == {dict})
    out: Columns = {}
    ids = column(events, "event_id")
    _need(set(map(type, ids)) == {str} and min(map(len, ids)) >= 1 and max(map(len, ids)) <= 160)
    _need(not CONTROL.search("".join(ids)))  # one C-level scan of the whole column
    out["event_id"] = ids
    out["ts"] = _timestamps(column(events, "ts"), cat)
    tenants = out["tenant"] = _slugs(column(events, "tenant"), cat.tenants)
    projects = [v or "" for v in column(events, "project")]
    if any(projects):
        _need(set(map(type, projects)) == {str})
        _need({p for p in zip(tenants, projects, strict=True) if p[1]} <= cat.projects)
    out["project"] = projects
    out["model"] = _slugs(column(events, "model"), cat.models)
    out["region"] = _slugs(column(events, "region"), cat.regions)
    out["traffic_class"] = _slugs(column(events, "traffic_class"), cat.classes)
    out["entitlement"] = _entitlements(column(events, "entitlement"))
    decisions = column(events, "decision")
    _need(set(decisions) <= DECISIONS)
    reasons = [v or "" for v in column(events, "reason")]
    for decision, reason in set(zip(decisions, reasons, strict=True)):
        _need(bool(reason) == (decision == "throttle") and (not reason or reason in REASONS))
    out["decision"], out["reason"] = decisions, reasons
    out["source_kind"] = _choices(column(events, "source_kind"), SOURCE_KINDS)
    # estimated_wt and prompt_tokens are required of every decision but `complete`
    required: bool | list[bool] = [d != "complete" for d in decisions] if "complete" in decisions else True
    out["estimated_wt"] = none_as(
        _numbers(column(events, "estimated_wt"), "estimated_wt", integer=False, required=required), 0.0
    )
    out["actual_wt"] = _numbers(column(events, "actual_wt"), "actual_wt", integer=False)
    prompt = none_as(_numbers(column(events, "prompt_tokens"), "prompt_tokens", integer=True, required=required), 0)
    cached = none_as(_numbers(column(events, "cached_prompt_tokens"), "cached_prompt_tokens", integer=True), 0)
    _need(not any(map(gt, cached, prompt)))
    out["prompt_tokens"], out["cached_prompt_tokens"] = prompt, cached
    out["output_tokens"] = none_as(_numbers(column(events, "output_tokens"), "output_tokens", integer=True), 0)
    out["ttft_ms"] = _numbers(column(events, "ttft_ms"), "ttft_ms", integer=False)
    out["e2e_ms"] = _numbers(column(events, "e2e_ms"), "e2e_ms", integer=False)
    slo = column(events, "slo_met")
    _need(set(map(type, slo)) <= {bool, _NONE})
    out["slo_met"] = slo
    out["status"] = _choices(column(events, "status"), STATUSES)
    out["in_flight"] = _numbers(column(events, "in_flight"), "in_flight", integer=True)
    out["served_from"] = _pools(column(events, "served_from"))
    flags = column(events, "prompt_capped"), column(events, "output_capped")
    _need(all(set(map(type, f)) <= {bool, _NONE} for f in flags))
    # most sources never cap: no flag set in the chunk is one C-level scan per column
    capped = any(flags[0]) or any(flags[1])
    out["capped"] = [bool(p or o) for p, o in zip(*flags, strict=True)] if capped else [False] * len(events)
    return out


def clean_columns(events: list[Any], cat: Catalogue) -> Columns | None:
    """Every event cleaned, by column; None when any event needs the row-by-row validator."""
    if not events:
        return None
    try:
        return _fast(events, cat)
    except (_Reject, ValueError, TypeError, OverflowError):
        # TypeError: an unhashable value in a set, or an order comparison between odd types
        return None


def rows_to_columns(rows: list[dict[str, Any]]) -> Columns:
    return {f: [r.get(f) for r in rows] for f in CLEANED}


def take(cols: Columns, keep: list[int]) -> Columns:
    """The rows at positions `keep`, in that order."""
    return {f: list(map(c.__getitem__, keep)) for f, c in cols.items()}
