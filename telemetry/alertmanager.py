"""`POST /api/v1/telemetry/alertmanager`: Alertmanager's webhook (version 4) into PoolAlert rows (issue 24).

Alertmanager posts `{version: "4", receiver, status, alerts: [{status, labels, annotations, startsAt, endsAt,
generatorURL, fingerprint}], groupLabels, commonLabels, commonAnnotations, externalURL, groupKey}` with
`Authorization: Bearer <token>` (a gateway-role token: `manage.py create_api_token`). Each alert is one
episode, keyed by (fingerprint, startsAt): a replay or a re-notification updates the same row, and a
resolved episode never goes back to firing (Alertmanager may deliver an older firing notification after
the resolved one). A post is written in bulk (one lock read, one insert, one update, each in bounded
batches), so a group of 5,000 alerts is a handful of queries, not a transaction each. Bad alerts are reported by index and field; the good ones in the same post are kept.
An alert without a pool label is bound through the Prometheus source it came from: a source whose
pool_label is `=<pool slug>` (Hyperion sets no pool label, telemetry.prom_presets) claims the alerts whose
`job` or `service` label is the source's job, as every rule of Hyperion's deploy/monitoring/alerting/rules
sets `service: hyperion-app` and ServiceDown's `up{job="hyperion-app"} == 0` carries `job`.
An alert naming no known pool either way is kept unbound and listed in the answer, never an error; the
admin shows each source's count of unbound alerts naming its job.

Supply alerts (telemetry.alert_rules.is_supply) reach admission through the pool's health
(admission.snapshot_reads reads telemetry.selectors.supply_alerts_down); PoolAlert writes bump the
snapshot's health counter (admission.snapshot_triggers), so every process sees them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.models import Pool
from entitlements.permissions import IsGateway
from http_plumbing.api_guards import NUL_MESSAGE, BatchJSONParser, unstorable
from telemetry.alert_rules import is_supply
from telemetry.models import PoolAlert, PrometheusSource
from telemetry.prom_presets import fixed_pool, job_of
from telemetry.validation import FieldError, parse_ts

STATES = ("firing", "resolved")
# Alertmanager sends this (Go's zero time) as endsAt of an alert with no known end.
ZERO_YEAR = 1970


@dataclass
class AlertResult:
    accepted: int = 0
    unchanged: int = 0
    unbound: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "unchanged": self.unchanged, "unbound": self.unbound, "errors": self.errors}


def _no_nul(value: str, name: str) -> str:
    # PostgreSQL stores no NUL or lone surrogate in text or jsonb: refused here, by field, rather than
    # failing the write.
    why = unstorable(value)
    if why is not None:
        raise FieldError(name, "contains a NUL character" if why == NUL_MESSAGE else why)
    return value


def _str_map(value: Any, name: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise FieldError(name, "must be an object of string values")
    for k, v in value.items():
        _no_nul(k, name)
        _no_nul(v, f"{name}.{k}")
    return value


def _time(value: Any, name: str, *, optional: bool) -> datetime | None:
    if optional and (value is None or value == ""):
        return None
    try:
        ts = parse_ts(value)
    except FieldError as exc:
        raise FieldError(name, exc.message) from None
    if optional and ts.year < ZERO_YEAR:
        return None
    return ts


def _check_times(starts_at: datetime | None, ends_at: datetime | None, state: str) -> None:
    """An episode starts no later than now (the event window's skew ahead), and ends after it starts.
    A firing alert's endsAt is Alertmanager's guess (startsAt + resolve_timeout) and is not stored,
    so only a resolved one's is bounded ahead."""
    latest = timezone.now() + timedelta(seconds=settings.TELEMETRY_TS_MAX_AHEAD_S)
    if starts_at is not None and starts_at > latest:
        raise FieldError("startsAt", f"in the future (at most {settings.TELEMETRY_TS_MAX_AHEAD_S:g} s ahead)")
    if ends_at is not None and starts_at is not None and ends_at < starts_at:
        raise FieldError("endsAt", "before startsAt")
    if state == "resolved" and ends_at is not None and ends_at > latest:
        raise FieldError("endsAt", f"in the future (at most {settings.TELEMETRY_TS_MAX_AHEAD_S:g} s ahead)")


def parse_alert(raw: Any) -> dict[str, Any]:
    """One alert of the payload → PoolAlert fields; FieldError names the first bad field."""
    if not isinstance(raw, dict):
        raise FieldError("alert", "must be an object")
    state = raw.get("status")
    if state not in STATES:
        raise FieldError("status", "must be 'firing' or 'resolved'")
    labels = _str_map(raw.get("labels"), "labels")
    alertname = labels.get("alertname", "")
    if not alertname:
        raise FieldError("labels.alertname", "required")
    fingerprint = raw.get("fingerprint")
    if not isinstance(fingerprint, str) or not fingerprint or len(fingerprint) > 64:
        raise FieldError("fingerprint", "required, a string of at most 64 characters")
    _no_nul(fingerprint, "fingerprint")
    starts_at = _time(raw.get("startsAt"), "startsAt", optional=False)
    ends_at = _time(raw.get("endsAt"), "endsAt", optional=True)
    if state == "resolved" and ends_at is None:
        raise FieldError("endsAt", "required when status is 'resolved'")
    _check_times(starts_at, ends_at, state)
    generator_url = raw.get("generatorURL") or ""
    if not isinstance(generator_url, str):
        raise FieldError("generatorURL", "must be a string")
    _no_nul(generator_url, "generatorURL")
    return {
        "fingerprint": fingerprint,
        "starts_at": starts_at,
        "ends_at": ends_at if state == "resolved" else None,
        "state": state,
        "alertname": alertname[:200],
        "labels": labels,
        "annotations": _str_map(raw.get("annotations"), "annotations"),
        "generator_url": generator_url[:2000],
        "kind": PoolAlert.Kind.SUPPLY if is_supply(alertname, generator_url) else PoolAlert.Kind.LOAD,
    }


def _check_envelope(data: Any) -> list[Any]:
    if not isinstance(data, dict):
        raise FieldError("body", "must be Alertmanager's webhook object")
    version = data.get("version")
    if version is not None and str(version) != "4":
        raise FieldError("version", "only version 4 of Alertmanager's webhook is understood")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise FieldError("alerts", "required, a list")
    if len(alerts) > settings.TELEMETRY_MAX_BATCH:
        raise FieldError("alerts", f"at most {settings.TELEMETRY_MAX_BATCH} per request")
    receiver = data.get("receiver", "")
    if not isinstance(receiver, str):
        raise FieldError("receiver", "must be a string")
    _no_nul(receiver, "receiver")
    return alerts


# Existing episodes are read this many fingerprints at a time (far below SQLite's bound variables).
READ_CHUNK = 2000
WRITE_BATCH = 500


def _store_all(items: list[tuple[dict[str, Any], Pool | None, str]], receiver: str, result: AlertResult) -> None:
    """Upsert a post's episodes in one transaction with a bounded number of queries: the existing
    rows locked in chunks (ordered by pk, so two posts lock in the same order), then one bulk insert
    and one bulk update in batches. The rules are applied in the post's order, as one by one: a
    resolved episode never goes back to firing, an unchanged one is counted unchanged."""
    if not items:
        return
    keyed = [((f["fingerprint"], f["starts_at"]), f, pool, label) for f, pool, label in items]
    fingerprints = sorted({k[0] for k, *_ in keyed})
    with transaction.atomic():
        current: dict[tuple[str, datetime], PoolAlert] = {}
        for i in range(0, len(fingerprints), READ_CHUNK):
            rows = PoolAlert.objects.select_for_update().filter(fingerprint__in=fingerprints[i : i + READ_CHUNK])
            current.update(((r.fingerprint, r.starts_at), r) for r in rows.order_by("pk"))
        new: dict[tuple[str, datetime], PoolAlert] = {}
        dirty: dict[tuple[str, datetime], PoolAlert] = {}
        fields_changed: set[str] = set()
        now = timezone.now()
        for key, fields, pool, label in keyed:
            # pool_id, not pool: comparing the related object would load it, a query per existing row
            values = {
                **fields,
                "pool_id": pool.pk if pool else None,
                "pool_label": label[:200],
                "receiver": receiver[:200],
            }
            row = current.get(key)
            if row is None:
                current[key] = new[key] = PoolAlert(**values)
                result.accepted += 1
                continue
            if row.state == PoolAlert.State.RESOLVED and values["state"] == PoolAlert.State.FIRING:
                result.unchanged += 1  # a late firing notification of an episode already resolved
                continue
            changed = {
                k: v for k, v in values.items() if getattr(row, k) != v and k not in ("fingerprint", "starts_at")
            }
            if not changed:
                result.unchanged += 1
                continue
            for k, v in changed.items():
                setattr(row, k, v)
            if key not in new:
                row.updated_at = now  # bulk_update does not run auto_now
                dirty[key] = row
                fields_changed |= changed.keys()
            result.accepted += 1
        PoolAlert.objects.bulk_create(new.values(), batch_size=WRITE_BATCH)
        if dirty:
            PoolAlert.objects.bulk_update(
                dirty.values(), [*sorted(fields_changed), "updated_at"], batch_size=WRITE_BATCH
            )


def source_pools() -> dict[str, str]:
    """job → pool slug, from the Prometheus sources that put all their series in one pool."""
    out: dict[str, str] = {}
    for src in PrometheusSource.objects.filter(enabled=True, pool_label__startswith="=").order_by("pk"):
        slug, job = fixed_pool(src.pool_label), job_of(src)
        if slug and job:
            out.setdefault(job, slug)
    return out


def receive(data: Any) -> AlertResult:
    """The webhook body → stored alerts. Raises FieldError for a body that is not a webhook at all."""
    alerts = _check_envelope(data)
    receiver = data.get("receiver", "")
    pool_label = settings.ALERTMANAGER_POOL_LABEL
    parsed: list[tuple[int, dict[str, Any]]] = []
    result = AlertResult()
    for i, raw in enumerate(alerts):
        try:
            parsed.append((i, parse_alert(raw)))
        except FieldError as exc:
            result.errors.append({"index": i, "field": exc.field, "message": exc.message})
    by_job = source_pools()
    slugs = {f["labels"].get(pool_label, "") for _, f in parsed} | set(by_job.values())
    pools = {p.slug: p for p in Pool.objects.filter(slug__in=slugs - {""})}
    items = []
    for i, fields in parsed:
        labels = fields["labels"]
        label = labels.get(pool_label, "")
        if not label:  # no pool label: the source scraping its job names the pool
            label = by_job.get(labels.get("job", ""), "") or by_job.get(labels.get("service", ""), "")
        pool = pools.get(label)
        if pool is None:
            result.unbound.append({"index": i, "alertname": fields["alertname"], pool_label: label or None})
        items.append((fields, pool, label))
    _store_all(items, receiver, result)
    return result


class AlertResultSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    unchanged = serializers.IntegerField()
    unbound = serializers.ListField(child=serializers.DictField())
    errors = serializers.ListField(child=serializers.DictField())  # type: ignore[assignment]  # a field, not .errors


class AlertmanagerWebhookView(APIView):
    permission_classes = [IsGateway]
    parser_classes = [BatchJSONParser]

    @extend_schema(request=None, responses={200: AlertResultSerializer, 400: AlertResultSerializer})
    def post(self, request: Request) -> Response:
        """Alertmanager's webhook → `{accepted, unchanged, unbound: [...], errors: [{index, field, message}]}`."""
        try:
            result = receive(request.data)
        except FieldError as exc:
            return Response({exc.field: [exc.message]}, status=status.HTTP_400_BAD_REQUEST)
        all_bad = result.errors and not result.accepted and not result.unchanged
        return Response(result.as_dict(), status=status.HTTP_400_BAD_REQUEST if all_bad else status.HTTP_200_OK)
