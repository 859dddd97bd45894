"""Per-event validation for ingest: each bad field becomes {index, field, message}; good events go on."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import repeat
from typing import Any

from django.utils.dateparse import parse_datetime

from entitlements.models import Project, Region, ServedModel, Tenant, TrafficClass
from entitlements.reasons import REASONS

DECISIONS = frozenset({"admit", "throttle", "complete"})
SOURCE_KINDS = frozenset({"entitlement", "borrowed", "fail_open"})
STATUSES = frozenset({"ok", "cancelled", "error", "expired"})


class FieldError(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Catalogue:
    """The slugs a batch refers to that exist: one query per table per batch, no per-row lookups."""

    tenants: frozenset[str]
    models: frozenset[str]
    regions: frozenset[str]
    classes: frozenset[str]
    projects: frozenset[tuple[str, str]]

    @classmethod
    def for_events(cls, events: Iterable[Any]) -> Catalogue:
        keys = ("tenant", "model", "region", "traffic_class", "project")
        dicts = [e for e in events if isinstance(e, dict)]
        seen: dict[str, set[str]] = {}
        for k in keys:
            try:
                values = set(map(dict.get, dicts, repeat(k)))  # one C-level pass per field
            except TypeError:  # an unhashable value: the validator will name it
                values = {v for e in dicts if isinstance(v := e.get(k), str)}
            seen[k] = {v for v in values if isinstance(v, str)}
        tenants = seen["tenant"]
        return cls(
            tenants=frozenset(Tenant.objects.filter(slug__in=tenants).values_list("slug", flat=True)),
            models=frozenset(ServedModel.objects.filter(slug__in=seen["model"]).values_list("slug", flat=True)),
            regions=frozenset(Region.objects.filter(slug__in=seen["region"]).values_list("slug", flat=True)),
            classes=frozenset(
                TrafficClass.objects.filter(slug__in=seen["traffic_class"]).values_list("slug", flat=True)
            ),
            projects=frozenset(
                Project.objects.filter(tenant__slug__in=tenants, slug__in=seen["project"]).values_list(
                    "tenant__slug", "slug"
                )
            )
            if seen["project"]
            else frozenset(),
        )


def parse_ts(value: Any) -> datetime:
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)  # C fast path; accepts Z on 3.11
        except ValueError:
            try:
                dt = parse_datetime(value)  # type: ignore[assignment]
            except ValueError:
                dt = None  # type: ignore[assignment]
        if dt is None:
            raise FieldError("ts", "not an ISO 8601 timestamp")
    else:
        raise FieldError("ts", "required, an ISO 8601 timestamp with a time zone")
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise FieldError("ts", "needs a time zone (e.g. Z or +00:00)")
    return dt.astimezone(UTC)


def _slug(e: dict, key: str, known: frozenset[str], what: str) -> str:
    v = e.get(key)
    if not isinstance(v, str) or not v:
        raise FieldError(key, "required")
    if v not in known:
        raise FieldError(key, f"unknown {what} {v!r}")
    return v


def _number(e: dict, key: str, *, required: bool = False, integer: bool = False) -> Any:
    v = e.get(key)
    t = type(v)
    if t is int and v >= 0:  # the common cases first: ingest validates every field of every event
        if integer:
            return v
        try:
            return float(v)
        except OverflowError:
            raise FieldError(key, "too large") from None
    if t is float and v >= 0 and v != math.inf and (not integer or v.is_integer()):
        return int(v) if integer else v
    if v is None:
        if required:
            raise FieldError(key, "required")
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise FieldError(key, "must be a number")
    if integer and (isinstance(v, float) and not v.is_integer()):
        raise FieldError(key, "must be a whole number")
    if not math.isfinite(v) or v < 0:
        raise FieldError(key, "must be a non-negative number")
    return int(v) if integer else float(v)


def _choice(e: dict, key: str, allowed: frozenset[str]) -> str:
    v = e.get(key)
    if v in (None, ""):
        return ""
    if not isinstance(v, str) or v not in allowed:
        raise FieldError(key, f"must be one of {', '.join(sorted(allowed))}")
    return str(v)


def clean_event(e: Any, cat: Catalogue) -> dict[str, Any]:
    """One event dict → the column values of an AdmissionEvent row, or FieldError."""
    if not isinstance(e, dict):
        raise FieldError("non_field_errors", "an event is a JSON object")
    event_id = e.get("event_id")
    if not isinstance(event_id, str) or not event_id or len(event_id) > 160:
        raise FieldError("event_id", "required, a string of at most 160 characters")
    ts = parse_ts(e.get("ts"))
    tenant = _slug(e, "tenant", cat.tenants, "tenant")
    project = e.get("project") or ""
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
    ent = e.get("entitlement")
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
    }
