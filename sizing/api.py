"""`POST /api/v1/sizing` (docs/contract.md §3) and `/api/v1/traces` (§6).

The request is parsed by sizing.parsing (shared with the calculator page). Every 400 names its field
(`{"error": {"fields": {field: [message]}}}`); a trace the caller may not see is a 404, the same as
one that does not exist.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from capacity.input_errors import SizingInputError
from capacity.rate_basis import BASES
from capacity.traces import TraceParseError
from entitlements.models.prices import Term
from entitlements.permissions import IsPerson
from sizing.parsing import COST_KEYS, NUMBERS, api_field, run_sizing, sizing_response
from sizing.quotes import check_quote_input, sizing_quotes
from telemetry.selectors import TraceNotFound, traces_visible_to, visible_trace
from telemetry.trace_import import owner_tenant, trace_import, trace_summary

SHOWN_TRACE_ERRORS = 100


class SizingView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(
        request=inline_serializer(
            "SizingRequest",
            {
                "model": serializers.CharField(),
                "accelerator": serializers.CharField(required=False),
                "arrival_rate_rps": serializers.FloatField(required=False),
                "arrival_rate_basis": serializers.ChoiceField(
                    choices=list(BASES), required=False, help_text="with a trace: which one-minute rate to size for"
                ),
                "prompt_tokens": serializers.JSONField(
                    help_text='{"mean","p50","p95","p99"}, {"samples"} or {"trace"}'
                ),
                "output_tokens": serializers.JSONField(
                    help_text='{"mean","p50","p95","p99"}, {"samples"} or {"trace"}'
                ),
                "slo": serializers.JSONField(help_text='{"ttft_p99_s", "tpot_p99_s"}'),
                **{k: serializers.FloatField(required=False) for k in NUMBERS},
                "failure_policy": serializers.CharField(required=False, help_text="replica:n, zone, fraction:f, none"),
                "zones": serializers.IntegerField(required=False),
                "cost": serializers.JSONField(required=False, help_text=", ".join(sorted(COST_KEYS))),
                "allow_ceiling": serializers.BooleanField(required=False),
                "workload_kind": serializers.CharField(
                    required=False, help_text="conversation or coding: the envelope's default minute-rate CV"
                ),
                "region": serializers.CharField(
                    required=False, help_text="the region whose pool quotes (default: first)"
                ),
                "quote_months": serializers.IntegerField(required=False, help_text="quote window, 1-36 months"),
                "term": serializers.ChoiceField(
                    choices=Term.choices, required=False, help_text="the term `cost` is priced at (on_demand)"
                ),
            },
        ),
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        """Size one request class: rates, residence, concurrency, KV p99, replicas, cost, and every step."""
        try:
            check_quote_input(request.data)
            prepared, result = run_sizing(request.data, request.user)
        except SizingInputError as e:
            raise ValidationError({api_field(e.field): [e.message]})
        except TraceNotFound as e:
            raise NotFound(f"{e.field}: {e.message}")
        body = sizing_response(prepared, result)
        body.update(sizing_quotes(request.data, body, prepared))  # docs/contract.md §10
        return Response(body)


def _max_trace_bytes() -> int:
    return settings.TRACE_MAX_BYTES


def _parse_error_response(e: TraceParseError) -> Response:
    shown = e.errors[:SHOWN_TRACE_ERRORS]
    messages = [f"line {ln} {field}: {msg}" for ln, field, msg in shown]
    if len(e.errors) > len(shown) or e.more:
        messages.append(f"… and {len(e.errors) - len(shown)}{' or more' if e.more else ''} more")
    count = f"{len(e.errors)} or more" if e.more else f"{len(e.errors)}"  # reading stopped at MAX_ERRORS
    body = {
        "code": "invalid",
        "message": f"{count} bad line(s); nothing was imported",
        "fields": {"file": messages},
        "lines": [{"line": ln, "field": field, "message": msg} for ln, field, msg in shown],
        "error_count": len(e.errors),
    }
    return Response({"error": body}, status=status.HTTP_400_BAD_REQUEST)


class TraceListView(APIView):
    permission_classes = [IsPerson]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(operation_id="traces_list", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request) -> Response:
        """Traces the caller may use: platform-wide ones and their own tenant's."""
        return Response([trace_summary(t) for t in traces_visible_to(request.user)])

    @extend_schema(
        request={
            "multipart/form-data": inline_serializer(
                "TraceUpload", {"file": serializers.FileField(), "name": serializers.CharField(required=False)}
            )
        },
        responses={201: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        """Upload a `TIMESTAMP,ContextTokens,GeneratedTokens` CSV; all rows are good or nothing is stored."""
        upload = request.FILES.get("file")
        if upload is None:
            raise ValidationError({"file": ["required: a CSV file in the multipart field 'file'"]})
        if upload.size > _max_trace_bytes():
            raise ValidationError({"file": [f"larger than {_max_trace_bytes():,} bytes"]})
        name = str(request.data.get("name") or upload.name or "trace")  # type: ignore[union-attr]  # multipart: a QueryDict
        try:
            trace = trace_import(
                data=upload.chunks(), name=name, tenant=owner_tenant(request.user), uploaded_by=request.user
            )
        except TraceParseError as e:
            return _parse_error_response(e)
        return Response(trace_summary(trace), status=status.HTTP_201_CREATED)


class TraceDetailView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(operation_id="traces_retrieve", responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, trace_id: Any) -> Response:
        try:
            trace = visible_trace(request.user, trace_id)
        except TraceNotFound:
            raise Http404
        return Response(trace_summary(trace))
