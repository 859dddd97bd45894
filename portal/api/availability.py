"""GET /api/v1/availability (docs/contract.md §11): where asked capacity could be granted, per pool.

Everyone signed in. The query is checked field by field (a 400 names the field) before anything is read;
the rows come from portal.availability, the approval's own figures.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements import roles
from entitlements.models import Region, ServedModel, TrafficClass
from entitlements.permissions import IsPerson
from portal.availability import SEARCH_DAYS, Ask, availability

MAX_AHEAD_DAYS = 3 * 366  # the longest commitment a price list sells (3 years)

# Far above any pool (the demo's largest delivers a few hundred CU), far below the CU column's 14 digits.
CU_MAX = Decimal(1_000_000)


class AvailabilityQuery(serializers.Serializer):
    model = serializers.SlugRelatedField(
        slug_field="slug", queryset=ServedModel.objects.filter(pools__isnull=False).distinct()
    )
    region = serializers.SlugRelatedField(slug_field="slug", queryset=Region.objects.all(), required=False)
    cu = serializers.DecimalField(max_digits=14, decimal_places=3, min_value=Decimal("0.001"), max_value=CU_MAX)
    until = serializers.DateField(required=False)
    traffic_class = serializers.SlugRelatedField(slug_field="slug", queryset=TrafficClass.objects.all(), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # `from` is a Python keyword: the field is declared here under its query name.
        self.fields["from"] = serializers.DateField(required=False)

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        today = timezone.now().date()
        start = data.get("from") or today
        if start < today:
            raise serializers.ValidationError({"from": "cannot be in the past"})
        if (start - today).days > MAX_AHEAD_DAYS:  # year 9999 would overflow the date arithmetic below
            raise serializers.ValidationError({"from": f"at most {MAX_AHEAD_DAYS} days from today"})
        until = data.get("until")
        if until is not None and until <= start:
            raise serializers.ValidationError({"until": "must be after from"})
        if until is not None and (until - start).days > SEARCH_DAYS:
            raise serializers.ValidationError({"until": f"at most {SEARCH_DAYS} days after from"})
        data["from"] = start
        return data


def ask_from(data: dict[str, Any], user: Any) -> Ask:
    tc = data.get("traffic_class") or TrafficClass.objects.get(slug="reserved")
    region = data.get("region")
    return Ask(
        model=data["model"],
        regions=[region] if region is not None else [],
        cu=data["cu"],
        start=data["from"],
        until=data.get("until"),
        traffic_class=tc,
        tenant=roles.tenant_of(user),
    )


class Availability(APIView):
    permission_classes = [IsPerson]

    @extend_schema(
        parameters=[
            OpenApiParameter("model", str, required=True),
            OpenApiParameter("region", str),
            OpenApiParameter("cu", str, required=True, description="CU asked, 0.001 to 1,000,000"),
            OpenApiParameter("from", str, description="YYYY-MM-DD, default today"),
            OpenApiParameter(
                "until", str, description=f"YYYY-MM-DD, at most {SEARCH_DAYS} days after from; empty: open"
            ),
            OpenApiParameter("traffic_class", str, description="default reserved"),
        ],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response:
        query = AvailabilityQuery(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        ask = ask_from(query.validated_data, request.user)
        rows = availability(ask, today=timezone.now().date())
        return Response(
            {
                "model": ask.model.slug,
                "region": ask.regions[0].slug if ask.regions else None,
                "cu": str(ask.cu),
                "from": ask.start.isoformat(),
                "until": ask.until.isoformat() if ask.until else None,
                "traffic_class": ask.traffic_class.slug,
                "rows": [r.to_dict() for r in rows],
            }
        )
