"""The serving-path endpoints (CONTRACT §5) and the operator's pool-health override.

Kept lean on purpose: the reserve view is benchmarked (bench/admission.py), so it validates by
hand and hands straight to admission.services.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from admission import services
from admission.auth import CachedGatewayTokenAuthentication
from entitlements.models import Pool
from entitlements.permissions import IsGateway, IsOperator

_THROTTLE = inline_serializer(
    "AdmissionThrottle",
    {
        "decision": serializers.CharField(),
        "reason": serializers.CharField(),
        "responsible": serializers.CharField(),
        "retry_after_s": serializers.IntegerField(),
    },
)


# The serving path: cached token check, no per-request queries.
SERVING_AUTH = [CachedGatewayTokenAuthentication, SessionAuthentication]


class ReserveView(APIView):
    authentication_classes = SERVING_AUTH
    permission_classes = [IsGateway]

    @extend_schema(
        request=inline_serializer(
            "ReserveRequest",
            {
                "request_id": serializers.CharField(),
                "tenant": serializers.CharField(),
                "project": serializers.CharField(required=False),
                "model": serializers.CharField(),
                "region": serializers.CharField(),
                "traffic_class": serializers.ChoiceField(services.CLASSES),
                "prompt_tokens": serializers.IntegerField(min_value=0),
                "cached_prompt_tokens": serializers.IntegerField(min_value=0, required=False),
                "max_output_tokens": serializers.IntegerField(min_value=0, required=False),
            },
        ),
        responses={
            200: inline_serializer(
                "ReserveAdmit",
                {
                    "decision": serializers.CharField(),
                    "reservation_id": serializers.CharField(),
                    "reserved_wt": serializers.FloatField(),
                    "source": serializers.ChoiceField(["entitlement", "borrowed", "fail_open"]),
                    "expires_at": serializers.DateTimeField(),
                },
            ),
            429: _THROTTLE,
        },
    )
    def post(self, request: Request) -> Response:
        d = services.reserve(services.parse_reserve(request.data))
        if d.status == 429:
            return Response(d.body, status=429, headers={"Retry-After": str(d.body["retry_after_s"])})
        return Response(d.body)


class CompleteView(APIView):
    authentication_classes = SERVING_AUTH
    permission_classes = [IsGateway]

    @extend_schema(
        request=inline_serializer(
            "CompleteRequest",
            {
                "reservation_id": serializers.CharField(),
                "prompt_tokens": serializers.IntegerField(min_value=0),
                "cached_prompt_tokens": serializers.IntegerField(min_value=0, required=False),
                "output_tokens": serializers.IntegerField(min_value=0),
                "status": serializers.ChoiceField(services.STATUSES),
                "ttft_ms": serializers.FloatField(required=False),
                "e2e_ms": serializers.FloatField(required=False),
            },
        ),
        responses={200: OpenApiResponse(description="settled"), 404: OpenApiResponse(description="unknown")},
    )
    def post(self, request: Request) -> Response:
        status, body = services.complete(services.parse_complete(request.data))
        return Response(body, status=status)


class PoolHealthView(APIView):
    """Operator override of a pool's healthy replicas; DELETE returns the pool to telemetry."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=inline_serializer(
            "PoolHealthRequest",
            {"replicas_healthy": serializers.IntegerField(min_value=0), "replicas_total": serializers.IntegerField()},
        ),
        responses={200: OpenApiResponse(description="the override")},
    )
    def post(self, request: Request, slug: str) -> Response:
        pool = get_object_or_404(Pool, slug=slug)
        data: Any = request.data
        fields = {}
        for name in ("replicas_healthy", "replicas_total"):
            v = data.get(name) if isinstance(data, dict) else None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValidationError({name: "must be a whole number ≥ 0"})
            fields[name] = v
        row = services.set_pool_health(pool=pool, actor=request.user, **fields)
        return Response({"pool": pool.slug, "replicas_healthy": row.replicas_healthy,
                         "replicas_total": row.replicas_total, "source": "operator"})  # fmt: skip

    @extend_schema(responses={204: OpenApiResponse(description="override removed")})
    def delete(self, request: Request, slug: str) -> Response:
        services.clear_pool_health(pool=get_object_or_404(Pool, slug=slug))
        return Response(status=204)
