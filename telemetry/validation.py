"""Per-event validation for ingest: each bad field becomes {index, field, message}; good events go on."""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Any

from django.conf import settings
from django.db import connection, models
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from capacity.input_errors import FieldError  # one event field at fault: the project's one input error
from entitlements.models import Project, Region, ServedModel, Tenant, TrafficClass
from entitlements.reasons import REASONS
from http_plumbing.api_guards import SURROGATE_MESSAGE
from http_plumbing.url_converters import DottedSlugConverter

DECISIONS = frozenset({"admit", "throttle", "complete"})
SOURCE_KINDS = frozenset({"entitlement", "borrowed", "spillover", "fail_open"})
STATUSES = frozenset({"ok", "cancelled", "error", "expired"})
# Completions that were not served (issue 33): served is `ok` (or, from a source that reports no status
# at all, docs/contract.md §6 not asking for one, a completion not reported as one of these).
NOT_SERVED = ("error", "cancelled", "expired")
# Upper bounds of an event's numbers: far above any real request (a million-token context, a day's
# latency), far below a bigint column and the sums of a rollup bucket (README "Input ranges").
TOKENS_MAX = 10**9
LIMITS: dict[str, float] = {
    "prompt_tokens": TOKENS_MAX,
    "cached_prompt_tokens": TOKENS_MAX,
    "output_tokens": TOKENS_MAX,
    "estimated_wt": 1e12,
    "actual_wt": 1e12,
    "ttft_ms": 86_400_000.0,
    "e2e_ms": 86_400_000.0,
    "in_flight": 10_000_000,  # reservations in flight in one scope
}
POOL_MAX = 80  # a pool slug's length (entitlements.models.Pool.slug)
# A pool slug's characters as the catalogue writes them, dots included (`llama-3.1-70b-…`: the same rule as
# the URLs', http_plumbing.url_converters): what served_from may say. A page or a log shows it, so markup,
# spaces and anything else a slug cannot hold are refused at the door.
SLUG = re.compile(DottedSlugConverter.regex)
SLUG_MESSAGE = f"a pool slug: letters, digits, '-', '_' or '.', at most {POOL_MAX} characters"
# C0, DEL and C1: never part of an identifier. A NUL also fails PostgreSQL's text types outright, and
# so does a lone UTF-16 surrogate (valid JSON, no UTF-8 for it: the COPY raises), so one scan finds both.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
CONTROL_MESSAGE = "must not contain control characters"


def has_control(value: str) -> bool:
    return CONTROL.search(value) is not None


def control_message(value: str) -> str:
    """What is wrong with a string `has_control` refused, in words naming the character class."""
    m = CONTROL.search(value)
    return SURROGATE_MESSAGE if m is not None and "\ud800" <= m.group() <= "\udfff" else CONTROL_MESSAGE


def ts_window(now: datetime) -> tuple[datetime, datetime]:
    """The plausible event times at `now`: TELEMETRY_TS_MAX_AGE_S back to TELEMETRY_TS_MAX_AHEAD_S ahead."""
    return (
        now - timedelta(seconds=settings.TELEMETRY_TS_MAX_AGE_S),
        now + timedelta(seconds=settings.TELEMETRY_TS_MAX_AHEAD_S),
    )


@dataclass(frozen=True)
class Catalogue:
    """What a batch is checked against: the slugs it refers to that exist (one query per table per
    batch, no per-row lookups) and the window of plausible timestamps (None: no bound that side)."""

    tenants: frozenset[str]
    models: frozenset[str]
    regions: frozenset[str]
    classes: frozenset[str]
    projects: frozenset[tuple[str, str]]
    earliest: datetime | None = None
    latest: datetime | None = None

    @classmethod
    def for_events(cls, events: Iterable[Any], now: datetime | None = None) -> Catalogue:
        keys = ("tenant", "model", "region", "traffic_class", "project")
        dicts = [e for e in events if isinstance(e, dict)]
        seen: dict[str, set[str]] = {}
        for k in keys:
            try:
                values = set(map(dict.get, dicts, repeat(k)))  # one C-level pass per field
            except TypeError:  # an unhashable value: the validator will name it
                values = {v for e in dicts if isinstance(v := e.get(k), str)}
            # a control character is a bad event anyway, and a NUL would fail the query on PostgreSQL
            seen[k] = {v for v in values if isinstance(v, str) and not has_control(v)}
        earliest, latest = ts_window(now or timezone.now())
        found = _known(seen)
        return cls(
            earliest=earliest,
            latest=latest,
            tenants=frozenset(v for k, v, _ in found if k == "tenant"),
            models=frozenset(v for k, v, _ in found if k == "model"),
            regions=frozenset(v for k, v, _ in found if k == "region"),
            classes=frozenset(v for k, v, _ in found if k == "traffic_class"),
            projects=frozenset((v, p) for k, v, p in found if k == "project"),
        )


def _column(model: type[models.Model], name: str) -> str:
    return connection.ops.quote_name(str(model._meta.get_field(name).column))  # type: ignore[union-attr]


def _known(seen: dict[str, set[str]]) -> list[tuple[str, str, str]]:
    """Which of the slugs a batch names exist, in one query (one round trip, not one per table): rows
    (field, slug, "") and, for projects, ("project", tenant slug, project slug)."""
    qn = connection.ops.quote_name
    parts: list[str] = []
    params: list[str] = []

    def some(values: set[str]) -> str:
        params.extend(sorted(values))
        return ", ".join(["%s"] * len(values))

    for key, model in (("tenant", Tenant), ("model", ServedModel), ("region", Region), ("traffic_class", TrafficClass)):
        if seen[key]:
            table, slug = qn(model._meta.db_table), _column(model, "slug")
            parts.append(f"SELECT '{key}', {slug}, '' FROM {table} WHERE {slug} IN ({some(seen[key])})")  # noqa: S608
    if seen["project"] and seen["tenant"]:
        p, t = qn(Project._meta.db_table), qn(Tenant._meta.db_table)
        tenant_id, t_pk = _column(Project, "tenant"), _column(Tenant, "id")
        t_slug, p_slug = _column(Tenant, "slug"), _column(Project, "slug")
        parts.append(
            f"SELECT 'project', t.{t_slug}, p.{p_slug} FROM {p} p JOIN {t} t ON t.{t_pk} = p.{tenant_id} "  # noqa: S608
            f"WHERE t.{t_slug} IN ({some(seen['tenant'])}) AND p.{p_slug} IN ({some(seen['project'])})"
        )
    if not parts:
        return []
    with connection.cursor() as cur:
        cur.execute(" UNION ALL ".join(parts), params)
        return [tuple(r) for r in cur.fetchall()]


def parse_ts(value: Any) -> datetime:
    dt: datetime | None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)  # C fast path; accepts Z on 3.11
        except ValueError:
            try:
                dt = parse_datetime(value)
            except ValueError:
                dt = None
        if dt is None:
            raise FieldError("ts", "not an ISO 8601 timestamp")
    else:
        raise FieldError("ts", "required, an ISO 8601 timestamp with a time zone")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise FieldError("ts", "needs a time zone (e.g. Z or +00:00)")
    try:
        return dt.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the calendar in UTC
        raise FieldError("ts", "outside the calendar") from None


def check_window(ts: datetime, earliest: datetime | None, latest: datetime | None) -> datetime:
    if (earliest is not None and ts < earliest) or (latest is not None and ts > latest):
        raise FieldError(
            "ts",
            f"outside the plausible window: at most {settings.TELEMETRY_TS_MAX_AGE_S:g} s old "
            f"and {settings.TELEMETRY_TS_MAX_AHEAD_S:g} s ahead",
        )
    return ts


def identifier(value: Any, key: str) -> Any:
    """`value` unchanged, or FieldError when it is a string with a control character in it."""
    if isinstance(value, str) and has_control(value):
        raise FieldError(key, control_message(value))
    return value


def _slug(e: dict, key: str, known: frozenset[str], what: str) -> str:
    v = identifier(e.get(key), key)
    if not isinstance(v, str) or not v:
        raise FieldError(key, "required")
    if v not in known:
        raise FieldError(key, f"unknown {what} {v!r}")
    return v


def _number(e: dict, key: str, *, required: bool = False, integer: bool = False) -> Any:
    v: Any = e.get(key)
    t = type(v)
    limit = LIMITS[key]
    if t is int and 0 <= v <= limit:  # the common cases first: ingest validates every field of every event
        return v if integer else float(v)
    if t is float and 0 <= v <= limit and (not integer or v.is_integer()):
        return int(v) if integer else v
    if v is None:
        if required:
            raise FieldError(key, "required")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FieldError(key, "must be a number")
    if integer and (isinstance(v, float) and not v.is_integer()):
        raise FieldError(key, "must be a whole number")
    if (isinstance(v, float) and not math.isfinite(v)) or v < 0:  # an int may be too large for isfinite
        raise FieldError(key, "must be a non-negative number")
    raise FieldError(key, f"at most {limit:,.0f}")  # beyond any request, and beyond a bigint column


def _choice(e: dict, key: str, allowed: frozenset[str]) -> str:
    v = e.get(key)
    if v in (None, ""):
        return ""
    if not isinstance(v, str) or v not in allowed:
        raise FieldError(key, f"must be one of {', '.join(sorted(allowed))}")
    return str(v)


def served_from(e: dict) -> str | None:
    """The pool a spilled request was served from, as admission answered it; None when not given.
    Stored as given, not checked against the catalogue: it is evidence of what admission said, and a
    pool renamed or retired before the event arrives must not cost the event its counts."""
    v = identifier(e.get("served_from"), "served_from")
    if v in (None, ""):
        return None
    if not isinstance(v, str) or len(v) > POOL_MAX or not SLUG.fullmatch(v):
        raise FieldError("served_from", SLUG_MESSAGE)
    return v


def clean_event(e: Any, cat: Catalogue) -> dict[str, Any]:
    """One event dict → the column values of an AdmissionEvent row, or FieldError."""
    if not isinstance(e, dict):
        raise FieldError("non_field_errors", "an event is a JSON object")
    event_id = e.get("event_id")
    if not isinstance(event_id, str) or not event_id or len(event_id) > 160:
        raise FieldError("event_id", "required, a string of at most 160 characters")
    identifier(event_id, "event_id")
    ts = check_window(parse_ts(e.get("ts")), cat.earliest, cat.latest)
    tenant = _slug(e, "tenant", cat.tenants, "tenant")
    project = identifier(e.get("project"), "project") or ""
    if project and (not isinstance(project, str) or (tenant, project) not in cat.projects):
        raise FieldError("project", f"unknown project {project!r} of tenant {tenant!r}")
    model = _slug(e, "model", cat.models, "model")
    region = _slug(e, "region", cat.regions, "region")
    traffic_class = _slug(e, "traffic_class", cat.classes, "traffic class")
    decision = e.get("decision")
    if not isinstance(decision, str) or decision not in DECISIONS:
        raise FieldError("decision", "must be one of admit, throttle, complete")
    reason = e.get("reason") or ""
    if reason and (not isinstance(reason, str) or reason not in REASONS):
        raise FieldError("reason", f"unknown reason code {reason!r}")
    if decision == "throttle" and not reason:
        raise FieldError("reason", "a throttle carries a reason code")
    if decision != "throttle" and reason:
        raise FieldError("reason", "only a throttle carries a reason code")
    ent = identifier(e.get("entitlement"), "entitlement")
    if ent not in (None, ""):
        try:
            ent = uuid.UUID(str(ent))
        except ValueError:
            raise FieldError("entitlement", "not a UUID")
    else:
        ent = None
    prompt = _number(e, "prompt_tokens", required=decision != "complete", integer=True) or 0
    cached = _number(e, "cached_prompt_tokens", integer=True) or 0
    if cached > prompt:
        raise FieldError("cached_prompt_tokens", "more than prompt_tokens")
    slo = e.get("slo_met")
    if slo is not None and not isinstance(slo, bool):
        raise FieldError("slo_met", "must be true, false or absent")
    for flag in ("prompt_capped", "output_capped"):
        if e.get(flag) is not None and not isinstance(e.get(flag), bool):
            raise FieldError(flag, "must be true, false or absent")
    return {
        "event_id": event_id,
        "ts": ts,
        "tenant": tenant,
        "project": project,
        "model": model,
        "region": region,
        "traffic_class": traffic_class,
        "entitlement": ent,
        "decision": decision,
        "reason": reason,
        "source_kind": _choice(e, "source_kind", SOURCE_KINDS),
        "estimated_wt": _number(e, "estimated_wt", required=decision != "complete") or 0.0,
        "actual_wt": _number(e, "actual_wt"),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "output_tokens": _number(e, "output_tokens", integer=True) or 0,
        "ttft_ms": _number(e, "ttft_ms"),
        "e2e_ms": _number(e, "e2e_ms"),
        "slo_met": slo,
        "status": _choice(e, "status", STATUSES),
        "in_flight": _number(e, "in_flight", integer=True),
        "served_from": served_from(e),
        "capped": bool(e.get("prompt_capped") or e.get("output_capped")),
    }
