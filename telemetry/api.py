"""Telemetry API: event and fleet ingest for gateways (docs/contract.md §6), usage series for people (§7)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.models import Tenant
from entitlements.permissions import IsGateway, IsOperator, MemberReadOperatorWrite
from http_plumbing.api_guards import BatchJSONParser
from telemetry.history_import import CSVError, import_history, parse_csv
from telemetry.periods import PeriodError
from telemetry.selectors import usage_series
from telemetry.services import check_source, fleet_samples_ingest, ingest_events
from telemetry.validation import FieldError, parse_ts


def _max_batch() -> int:
    return settings.TELEMETRY_MAX_BATCH


class IngestResultSerializer(serializers.Serializer):
    accepted = serializers.IntegerField()
    duplicates = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.DictField())  # type: ignore[assignment]  # a field, not .errors


def _result_response(result: Any) -> Response:
    """200 when anything was good (errors listed), 400 when every item was bad."""
    body = result.as_dict()
    all_bad = result.errors and result.accepted == 0 and result.duplicates == 0
    return Response(body, status=status.HTTP_400_BAD_REQUEST if all_bad else status.HTTP_200_OK)


def _items(request: Request, key: str) -> tuple[str, list[Any]]:
    data = request.data
    if isinstance(data, list):
        source, items = "api", data
    elif isinstance(data, dict) and key in data:
        source, items = data.get("source", "api"), data[key]
    elif isinstance(data, dict) and key == "samples":
        source, items = data.get("source", "api"), [data]  # one bare sample
    else:
        raise ValidationError({key: ["required, a list"]})
    try:
        source = check_source(source)
    except ValueError as exc:
        raise ValidationError({"source": [str(exc).removeprefix("source: ")]}) from None
    if not isinstance(items, list):
        raise ValidationError({key: ["must be a list"]})
    if len(items) > _max_batch():
        raise ValidationError({key: [f"at most {_max_batch()} per request"]})
    return source, items


class EventsIngestView(APIView):
    permission_classes = [IsGateway]
    parser_classes = [BatchJSONParser]

    @extend_schema(request=None, responses={200: IngestResultSerializer, 400: IngestResultSerializer})
    def post(self, request: Request) -> Response:
        """`{source, events: [...]}` → `{accepted, duplicates, errors: [{index, field, message}]}`."""
        source, events = _items(request, "events")
        return _result_response(ingest_events(source=source, events=events))


class FleetIngestView(APIView):
    permission_classes = [IsGateway]
    parser_classes = [BatchJSONParser]

    @extend_schema(request=None, responses={200: IngestResultSerializer, 400: IngestResultSerializer})
    def post(self, request: Request) -> Response:
        """One sample `{pool, ts, replicas_healthy, …}`, a list of them, or `{source, samples: [...]}`."""
        source, samples = _items(request, "samples")
        return _result_response(fleet_samples_ingest(source=source, samples=samples))


class HistoryResultSerializer(IngestResultSerializer):
    live = serializers.IntegerField()


class HistoryImportView(APIView):
    """Hourly history from another gateway (issue 47, docs/migrating.md), operators only: a CSV body
    (`Content-Type: text/csv`) or JSON `{rows: [...]}` / `[...]`."""

    permission_classes = [IsOperator]
    parser_classes = [BatchJSONParser]

    @extend_schema(request=None, responses={200: HistoryResultSerializer, 400: HistoryResultSerializer})
    def post(self, request: Request) -> Response:
        """`→ {accepted, duplicates, live, errors: [{index, field, message}]}`; bad rows named, good rows kept."""
        if (request.content_type or "").startswith("text/csv"):
            try:
                rows: Any = parse_csv(request.body)
            except CSVError as exc:
                raise ValidationError({"body": [str(exc)]}) from None
        else:
            data = request.data
            rows = data.get("rows") if isinstance(data, dict) else data
            if not isinstance(rows, list):
                raise ValidationError({"rows": ["required, a list"]})
        if len(rows) > _max_batch():
            raise ValidationError({"rows": [f"at most {_max_batch()} per request"]})
        return _result_response(import_history(rows))


def _when(q: Any, name: str) -> Any:
    if not q.get(name):
        return None
    try:
        return parse_ts(q[name])
    except FieldError as exc:
        raise ValidationError({name: [exc.message]})


class UsageView(APIView):
    permission_classes = [MemberReadOperatorWrite]

    @extend_schema(
        parameters=[
            OpenApiParameter("tenant", str),
            OpenApiParameter("model", str),
            OpenApiParameter("region", str),
            OpenApiParameter("start", str, description="ISO 8601 with zone; default end − 6 h"),
            OpenApiParameter("end", str, description="ISO 8601 with zone; default now"),
            OpenApiParameter("step", int, description="seconds; rounded up to the rollup level"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        q = request.query_params
        end = _when(q, "end") or timezone.now()
        start = _when(q, "start") or end - timedelta(hours=6)
        step = None
        if q.get("step"):
            try:
                step = int(q["step"])
            except ValueError:
                raise ValidationError({"step": ["a whole number of seconds"]})
            if step <= 0:
                raise ValidationError({"step": ["must be positive"]})
        try:
            data = usage_series(
                request.user, q.get("tenant") or None, q.get("model"), q.get("region"), start, end, step
            )
        except Tenant.DoesNotExist:
            raise Http404("no such tenant")
        except PeriodError as exc:
            raise ValidationError({exc.field: [exc.message]})
        return Response(data)
