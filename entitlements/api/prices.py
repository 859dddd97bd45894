"""`GET /api/v1/prices` (docs/contract.md §10): the price list, for everyone signed in. Operators edit it in
the admin (entitlements.admin_prices), where every change is audited with who and why."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.models import Price
from entitlements.models.prices import TERM_MONTHS
from entitlements.permissions import IsPerson


class PriceSerializer(serializers.ModelSerializer):
    accelerator: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(read_only=True, slug_field="slug")
    region: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(read_only=True, slug_field="slug")
    usd_per_accelerator_hour = serializers.FloatField()

    class Meta:
        model = Price
        fields = ["accelerator", "region", "term", "usd_per_accelerator_hour", "effective_from", "source"]


FILTERS = {"accelerator": "accelerator__slug", "region": "region__slug", "term": "term"}


class PriceListView(APIView):
    permission_classes = [IsPerson]

    @extend_schema(
        parameters=[OpenApiParameter(name, str, required=False) for name in FILTERS],
        responses={200: PriceSerializer(many=True)},
    )
    def get(self, request: Request) -> Response:
        """Every row of the price list (each term from its `effective_from`), optionally for one accelerator,
        region or term; an unknown term is a 400 naming `term`."""
        term = request.query_params.get("term")
        if term is not None and term not in TERM_MONTHS:
            raise ValidationError({"term": [f"unknown term: one of {', '.join(TERM_MONTHS)}"]})
        rows = Price.objects.select_related("accelerator", "region")
        for name, field in FILTERS.items():
            value = request.query_params.get(name)
            if value:
                rows = rows.filter(**{field: value[:80]})
        return Response({"results": PriceSerializer(rows, many=True).data})
