"""GET /api/v1/entitlements/{id}/statement?start=&end= (docs/contract.md §7, §8): the evidence statement."""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from telemetry.periods import PeriodError
from telemetry.statement import statement, statement_entitlement
from telemetry.statement_period import period_from_query


def period_from(query: Any) -> tuple[Any, Any]:
    """`start` / `end` (telemetry.statement_period) → a resolved period; a bad one is a 400 naming the field."""
    try:
        return period_from_query(query)
    except PeriodError as exc:
        raise ValidationError({exc.field: [exc.message]})


class StatementView(APIView):
    # who may read which statement is decided per object (statement_entitlement): others get 404
    permission_classes = [IsAuthenticated]

    @extend_schema(
        parameters=[
            OpenApiParameter("start", str, description="ISO 8601 with zone; default end − 30 days"),
            OpenApiParameter("end", str, description="ISO 8601 with zone; default now"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request, uuid: Any) -> Response:
        ent = statement_entitlement(request.user, uuid)
        if ent is None:
            raise Http404("no such entitlement")
        start, end = period_from(request.query_params)
        return Response(statement(ent, start, end))
