"""GET entitlements/snapshot for gateways, with ETag / If-None-Match."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.api.snapshot import build_snapshot, if_none_match, remember, remembered, stamp_read
from entitlements.permissions import IsGateway


class SnapshotEnvelopeSerializer(serializers.Serializer):
    max_prompt_tokens = serializers.IntegerField()
    max_output_tokens = serializers.IntegerField()
    prompt_p50 = serializers.IntegerField()
    prompt_p95 = serializers.IntegerField()
    output_p50 = serializers.IntegerField()
    output_p95 = serializers.IntegerField()
    ttft_p99_ms = serializers.IntegerField()
    tpot_p99_ms = serializers.IntegerField()
    streaming = serializers.BooleanField()


class SnapshotEntitlementSerializer(serializers.Serializer):
    uuid = serializers.UUIDField()
    tenant = serializers.CharField()
    project = serializers.CharField(allow_null=True)
    model = serializers.CharField()
    region = serializers.CharField()
    pool = serializers.CharField()
    traffic_class = serializers.CharField()
    cu = serializers.FloatField()
    rate_wt_per_s = serializers.FloatField(help_text="cu × R")
    bucket_depth_wt = serializers.FloatField(help_text="rate × 60 s")
    w_out = serializers.FloatField()
    w_cached = serializers.FloatField()
    envelope = SnapshotEnvelopeSerializer()
    max_concurrency = serializers.IntegerField()
    overage = serializers.CharField()
    borrowing_limit_cu = serializers.FloatField()
    borrowing_limit_wt_per_s = serializers.FloatField()
    lending_limit_cu = serializers.FloatField(
        allow_null=True, help_text="reserved/shared: CU lent at most; null: all idle"
    )
    weight = serializers.FloatField(allow_null=True, help_text="best_effort: fair-share weight (default 1); else null")
    version = serializers.IntegerField(help_text="the entitlement's own version")


class SnapshotPoolSerializer(serializers.Serializer):
    slug = serializers.CharField()
    model = serializers.CharField()
    region = serializers.CharField()
    deliverable_cu = serializers.FloatField()
    rate_wt_per_s = serializers.FloatField()


class SnapshotSerializer(serializers.Serializer):
    version = serializers.CharField(help_text="hash of the content; also the ETag")
    generated_at = serializers.DateTimeField()
    entitlements = SnapshotEntitlementSerializer(many=True)
    pools = SnapshotPoolSerializer(many=True)
    admission = serializers.DictField(
        required=False,
        help_text="what the serving path enforces (scopes, pools, settings) for library-mode gateways (admission.library)",
    )


class SnapshotView(APIView):
    permission_classes = [IsGateway]

    @extend_schema(
        operation_id="entitlements_snapshot",
        parameters=[OpenApiParameter("If-None-Match", str, OpenApiParameter.HEADER, required=False)],
        responses={200: SnapshotSerializer, 304: OpenApiResponse(description="unchanged since that ETag")},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        header = request.headers.get("If-None-Match", "")
        # The stamp is read before the build: rows read after it are at least as new, so a write
        # that lands meanwhile moves the stamp the next poll reads and is never hidden behind it.
        key = stamp_read()
        known = remembered(key)
        if known is not None and if_none_match(header, known):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": f'"{known}"'})
        snap = build_snapshot()
        remember(key, snap["version"])
        etag = f'"{snap["version"]}"'
        if if_none_match(header, snap["version"]):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        return Response(snap, headers={"ETag": etag})
