"""History import (issue 47; docs/migrating.md): hourly totals from another gateway, stored as rollups.

A team moving from Atlas or another gateway brings its hourly totals per tenant × model × region × class:
`hour, tenant, model, region, traffic_class, requests, prompt_tokens, output_tokens, throttled` (CSV with
that header, or JSON objects with those keys), up to HISTORY_MAX_DAYS back. `requests` is every request
that arrived in the hour, `throttled` how many of them were refused, the token counts are those of the
served ones (requests − throttled).

Validated row by row and field by field like events (telemetry.validation; each bad field becomes
{index, field, message}, the good rows are kept), then stored as hour rollups marked `imported`, with
their day rollups recomputed, so forecasts (forecasting.history) and reconciliation (telemetry.usage) read
them like any history. Per row and hour:

- an `admit` row: the served requests and their weighted tokens (prompt + w_out × output, the model's
  weights, capacity.units) as `estimated_wt`;
- a `complete` row: the served requests, their prompt and output tokens and `actual_wt`;
- a `throttle` row when `throttled` > 0: its weighted tokens estimated at the served requests' mean size
  (a refused request never ran; an estimate is all any history has for it, forecasting.history), with
  the reason code `IMPORTED` (responsible `unknown`, entitlements.reasons): the other gateway recorded the
  refusal, not its cause, so statements and reconciliation blame neither the tenant nor the platform for
  it, while forecasts still count it as demand that arrived.

Idempotent: a row whose hour is already stored from an import with the same numbers is a duplicate and
not rewritten; different numbers replace the earlier import's rows for that hour and key. An hour that
live telemetry already covers for the same tenant, model, region and class is kept as it is (`live`):
what this deployment measured wins over what another system reported. Live telemetry arriving later
for an imported hour replaces it the same way (telemetry.fold marks the row not imported).
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from capacity.units import TokenWeights, weighted_tokens
from entitlements.models import ServedModel
from entitlements.reasons import IMPORTED
from telemetry import fold
from telemetry.models import DayRollup, HourRollup
from telemetry.sql import insert_rows
from telemetry.validation import Catalogue, FieldError, _slug, identifier, parse_ts

FIELDS = (
    "hour",
    "tenant",
    "model",
    "region",
    "traffic_class",
    "requests",
    "prompt_tokens",
    "output_tokens",
    "throttled",
)
REQUIRED = FIELDS[:-1]  # `throttled` may be left out: none
COUNT_MAX = 10**10  # requests in an hour: far above any gateway
TOKENS_MAX = 10**14  # tokens in an hour: far above any fleet, far below a bigint
HOUR = timedelta(hours=1)
Key = tuple[datetime, str, str, str, str]  # hour, tenant, model, region, class
COLUMNS = (
    "bucket",
    "tenant",
    "model",
    "region",
    "traffic_class",
    "decision",
    "reason",
    "requests",
    "estimated_wt",
    "actual_wt",
    "prompt_tokens",
    "output_tokens",
    "imported",
)


def max_days() -> int:
    return int(getattr(settings, "TELEMETRY_HISTORY_MAX_DAYS", 400))


@dataclass
class HistoryResult:
    accepted: int = 0
    duplicates: int = 0
    live: int = 0  # hours live telemetry already covers: kept as measured
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "duplicates": self.duplicates, "live": self.live, "errors": self.errors}


class CSVError(ValueError):
    """The file as a whole cannot be read as a CSV with the expected header."""


def parse_csv(data: bytes) -> list[dict[str, str]]:
    """Rows of a CSV with a header naming at least the REQUIRED columns (any order, extra columns ignored)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CSVError(f"not UTF-8 (byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [f for f in REQUIRED if f not in header]
    if missing:
        raise CSVError(f"the header must name {', '.join(FIELDS)}; missing {', '.join(missing)}")
    reader.fieldnames = header
    return [{k: (v or "").strip() for k, v in row.items() if k in FIELDS} for row in reader]


def _count(row: dict, key: str, limit: int, *, required: bool = True) -> int:
    v = row.get(key)
    if v in (None, ""):
        if required:
            raise FieldError(key, "required")
        return 0
    if isinstance(v, str):
        try:
            v = float(v) if any(c in v for c in ".eE") else int(v)
        except ValueError:
            raise FieldError(key, "must be a whole number") from None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FieldError(key, "must be a whole number")
    if isinstance(v, float) and not v.is_integer():
        raise FieldError(key, "must be a whole number")
    if v < 0:
        raise FieldError(key, "must be a non-negative number")
    if v > limit:
        raise FieldError(key, f"at most {limit:,}")
    return int(v)


def clean_row(row: Any, cat: Catalogue, earliest: datetime, latest: datetime) -> dict[str, Any]:
    """One row → its checked values, or FieldError naming the field."""
    if not isinstance(row, dict):
        raise FieldError("non_field_errors", "a row is a JSON object")
    try:
        hour = parse_ts(identifier(row.get("hour"), "hour"))
    except FieldError as exc:
        raise FieldError("hour", exc.message) from None
    if hour != hour.replace(minute=0, second=0, microsecond=0):
        raise FieldError("hour", "must be on the hour (the hour's start, e.g. 2026-03-01T13:00:00Z)")
    if not earliest <= hour <= latest:
        raise FieldError("hour", f"must be a past hour at most {max_days()} days back")
    out: dict[str, Any] = {"hour": hour}
    out["tenant"] = _slug(row, "tenant", cat.tenants, "tenant")
    out["model"] = _slug(row, "model", cat.models, "model")
    out["region"] = _slug(row, "region", cat.regions, "region")
    out["traffic_class"] = _slug(row, "traffic_class", cat.classes, "traffic class")
    out["requests"] = _count(row, "requests", COUNT_MAX)
    out["prompt_tokens"] = _count(row, "prompt_tokens", TOKENS_MAX)
    out["output_tokens"] = _count(row, "output_tokens", TOKENS_MAX)
    out["throttled"] = _count(row, "throttled", COUNT_MAX, required=False)
    if out["throttled"] > out["requests"]:
        raise FieldError("throttled", "more than requests")
    if out["throttled"] and out["throttled"] == out["requests"]:
        # Nothing served gives the refused requests no size: their demand would be stored as zero.
        raise FieldError("throttled", "all of requests: with none served their size is unknown")
    if out["requests"] == out["throttled"] and (out["prompt_tokens"] or out["output_tokens"]):
        raise FieldError("requests", "tokens without a served request")
    return out


def _rows(r: dict[str, Any], w: TokenWeights) -> list[list[Any]]:
    served = r["requests"] - r["throttled"]
    wt = weighted_tokens(prompt=r["prompt_tokens"], output=r["output_tokens"], weights=w)
    key = [r["hour"], r["tenant"], r["model"], r["region"], r["traffic_class"]]
    out = [
        [*key, "admit", "", served, wt, 0.0, 0, 0, True],
        [*key, "complete", "", served, wt, wt, r["prompt_tokens"], r["output_tokens"], True],
    ]
    if r["throttled"]:
        out.append([*key, "throttle", IMPORTED, r["throttled"], wt / served * r["throttled"], 0.0, 0, 0, True])
    return out


def _stored(keys: set[Key]) -> tuple[set[Key], dict[Key, list[tuple]]]:
    """(hours live telemetry covers, the imported rows already stored) for these keys' tenants and span."""
    if not keys:
        return set(), {}
    hours = [k[0] for k in keys]
    qs = HourRollup.objects.filter(
        bucket__gte=min(hours), bucket__lte=max(hours), tenant__in={k[1] for k in keys}
    ).values_list(*COLUMNS)
    live: set[Key] = set()
    imported: dict[Key, list[tuple]] = defaultdict(list)
    for row in qs.iterator(chunk_size=5000):
        k: Key = (row[0].astimezone(UTC), *row[1:5])
        if k not in keys:
            continue
        if row[-1]:
            imported[k].append((row[5], *row[7:12]))
        else:
            live.add(k)
    return live, imported


def _same(new: list[list[Any]], old: list[tuple]) -> bool:
    want = sorted((r[5], r[7], round(r[8], 6), round(r[9], 6), r[10], r[11]) for r in new)
    have = sorted((o[0], o[1], round(o[2], 6), round(o[3], 6), o[4], o[5]) for o in old)
    return want == have


def _full(rows: list[list[Any]]) -> tuple[list[str], list[list[Any]]]:
    """The rows over every column of the table: the others at their defaults (no column has a database
    default but `imported`, so a COPY of some columns would leave the rest NULL)."""
    fields = [f for f in HourRollup._meta.concrete_fields if not f.primary_key]
    names = [f.name for f in fields]
    template = [f.get_default() for f in fields]
    at = [names.index(c) for c in COLUMNS]
    out = []
    for r in rows:
        full = list(template)
        for i, v in zip(at, r, strict=True):
            full[i] = v
        out.append(full)
    return names, out


def import_history(rows: list[Any], *, now: datetime | None = None) -> HistoryResult:
    now = now or timezone.now()
    latest = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0) - HOUR  # whole hours only
    earliest = latest - timedelta(days=max_days())
    cat = Catalogue.for_events(rows)
    weights = {
        slug: TokenWeights(w_out=w_out, w_cached=w_cached)
        for slug, w_out, w_cached in ServedModel.objects.filter(slug__in=cat.models).values_list(
            "slug", "w_out", "w_cached"
        )
    }
    result = HistoryResult()
    clean: dict[Key, tuple[int, dict[str, Any]]] = {}
    for i, row in enumerate(rows):
        try:
            r = clean_row(row, cat, earliest, latest)
            k: Key = (r["hour"], r["tenant"], r["model"], r["region"], r["traffic_class"])
            if k in clean:
                raise FieldError(
                    "hour", f"a second row for this hour, tenant, model, region and class (row {clean[k][0]})"
                )
        except FieldError as exc:
            result.errors.append({"index": i, "field": exc.field, "message": exc.message})
            continue
        clean[k] = (i, r)
    with transaction.atomic():
        live, imported = _stored(set(clean))
        write: list[list[Any]] = []
        replaced: dict[tuple[str, str, str, str], list[datetime]] = defaultdict(list)
        for k in sorted(clean):
            if k in live:
                result.live += 1
                continue
            new = _rows(clean[k][1], weights[k[2]])
            if k in imported and _same(new, imported[k]):
                result.duplicates += 1
                continue
            if k in imported:
                replaced[k[1:]].append(k[0])
            write += new
            result.accepted += 1
        for (tenant, model, region, cls), hours in replaced.items():
            same = {"tenant": tenant, "model": model, "region": region, "traffic_class": cls}
            for at in range(0, len(hours), 1000):
                HourRollup.objects.filter(imported=True, bucket__in=hours[at : at + 1000], **same).delete()
            # the days refold below from their hours; a decision no longer there must not linger
            DayRollup.objects.filter(bucket__in={h.replace(hour=0) for h in hours}, **same).delete()
        insert_rows(HourRollup, *_full(write))
        fold.refold_days({r[0].replace(hour=0) for r in write})
    return result
