"""`GET /api/v1/charges?period=YYYY-MM[&tenant=]` (docs/contract.md §10) as JSON, CSV (`?format=csv` or
`Accept: text/csv`) and CloudEvents 1.0 (`?format=cloudevents` or `Accept: application/cloudevents-batch+json`,
one `headroom.charge.v1` event per row) for a billing system. Operators see every tenant, a tenant member their
own; another tenant's charges are a 404, an approver a 403 (telemetry.charges). A bad `period` is a 400 naming it."""

from __future__ import annotations

import csv
import hashlib
import io
import json
from typing import Any

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.permissions import IsPerson
from telemetry.charges import (
    KEY,
    ChargesForbidden,
    ChargesNotFound,
    PeriodInvalid,
    charges,
    check_may_read,
    parse_period,
)

CSV_COLUMNS = [*KEY, "cu_hours_bought", "cu_hours_used", "usd_committed", "usd_on_demand", "usd_total"]
EVENT_TYPE = "headroom.charge.v1"
EVENT_SOURCE = "/api/v1/charges"


def _not_charges(data: Any) -> bool:
    return not isinstance(data, dict) or "rows" not in data


class ChargesCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if _not_charges(data):  # an error answer keeps its JSON body
            return json.dumps(data).encode()
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(["period", *CSV_COLUMNS])
        for row in data["rows"]:
            w.writerow([data["period"], *(row[c] for c in CSV_COLUMNS)])
        return out.getvalue().encode()


def charge_events(data: dict[str, Any]) -> list[dict[str, Any]]:
    """One CloudEvents 1.0 event per row; the id is stable for (period, row), so a re-export deduplicates."""
    events = []
    for row in data["rows"]:
        subject = "/".join(row[k] or "-" for k in KEY)
        events.append(
            {
                "specversion": "1.0",
                "type": EVENT_TYPE,
                "source": EVENT_SOURCE,
                "id": hashlib.sha256(f"{data['period']}|{subject}".encode()).hexdigest()[:32],
                "time": data["end"],
                "subject": subject,
                "datacontenttype": "application/json",
                "data": {"period": data["period"], "currency": data["currency"], **{c: row[c] for c in CSV_COLUMNS}},
            }
        )
    return events


class CloudEventsRenderer(BaseRenderer):
    media_type = "application/cloudevents-batch+json"
    format = "cloudevents"
    charset = None

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        return json.dumps(data if _not_charges(data) else charge_events(data)).encode()


class ChargesView(APIView):
    permission_classes = [IsPerson]
    renderer_classes = [JSONRenderer, ChargesCSVRenderer, CloudEventsRenderer]

    @extend_schema(
        parameters=[
            OpenApiParameter("period", str, required=True, description="the month, YYYY-MM (UTC)"),
            OpenApiParameter("tenant", str, required=False, description="operators: one tenant"),
            OpenApiParameter("format", str, required=False, enum=["json", "csv", "cloudevents"]),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request: Request) -> Response:
        try:
            check_may_read(request.user)
            month = parse_period(request.query_params.get("period"))
            return Response(charges(request.user, month, request.query_params.get("tenant") or None))
        except PeriodInvalid as exc:
            raise ValidationError({"period": [str(exc)]})
        except ChargesNotFound:
            raise Http404("no such tenant")
        except ChargesForbidden as exc:
            raise PermissionDenied(str(exc))
