"""Planning API: forecasts (tenants see their own), supply gap and cost (staff), runs (operator)."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements.permissions import IsOperator, IsStaffRole, MemberReadOperatorWrite
from forecasting import cost_report, gap, selectors, services
from forecasting.models import ForecastRun


class RunInput(serializers.Serializer):
    parameters = serializers.DictField(required=False, default=dict)


class ForecastsView(APIView):
    # Members and staff read; the queryset narrows members to their own tenant.
    permission_classes = [MemberReadOperatorWrite]

    @extend_schema(
        parameters=[OpenApiParameter(n, str, required=False) for n in ("tenant", "model", "region")],
        responses={200: dict},
    )
    def get(self, request: Request) -> Response:
        qs = selectors.series_visible_to(request.user)
        filters = {k: request.query_params[k] for k in ("model", "region") if request.query_params.get(k)}
        if request.query_params.get("tenant"):
            filters["tenant_slug"] = request.query_params["tenant"]
        qs = qs.filter(**filters)
        # Asking for a tenant you cannot see looks exactly like asking for one that does not exist.
        if "tenant_slug" in filters and not qs.exists():
            raise Http404
        run = selectors.latest_run()
        return Response({"run": selectors.run_summary(run), "series": [selectors.series_summary(s) for s in qs]})


class RunsView(APIView):
    permission_classes = [IsOperator]

    @extend_schema(request=RunInput, responses={202: dict})
    def post(self, request: Request) -> Response:
        data = RunInput(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            run = services.forecast_run_request(requested_by=request.user, parameters=data.validated_data["parameters"])
        except services.BadParameters as exc:
            raise serializers.ValidationError({"parameters": [str(exc)]})
        run.refresh_from_db()
        return Response(selectors.run_summary(run), status=status.HTTP_202_ACCEPTED)


class RunDetailView(APIView):
    permission_classes = [IsStaffRole]

    @extend_schema(responses={200: dict})
    def get(self, request: Request, run_id: str) -> Response:
        run = ForecastRun.objects.filter(pk=run_id).first()
        if run is None:
            raise Http404
        return Response(selectors.run_summary(run))


class SupplyGapView(APIView):
    permission_classes = [IsStaffRole]

    @extend_schema(responses={200: dict})
    def get(self, request: Request) -> Response:
        run, pools = gap.supply_gap()
        return Response({"run": selectors.run_summary(run), "pools": pools})


class CostView(APIView):
    permission_classes = [IsStaffRole]

    @extend_schema(parameters=[OpenApiParameter("days", int, required=False)], responses={200: dict})
    def get(self, request: Request) -> Response:
        try:
            days = int(request.query_params.get("days", 7))
        except ValueError:
            raise serializers.ValidationError({"days": ["must be a whole number"]})
        if not 1 <= days <= 90:
            raise serializers.ValidationError({"days": ["must be within 1–90"]})
        rows = cost_report.pool_cost_report(days=days)
        return Response(
            {
                "days": days,
                "pools": [
                    {
                        **{
                            k: v
                            for k, v in r.items()
                            if k not in ("fully_loaded", "fully_loaded_at_busiest_hour", "marginal")
                        },
                        "fully_loaded_per_million_useful_output_tokens": r["fully_loaded"].to_dict(),
                        "fully_loaded_at_busiest_hour": r["fully_loaded_at_busiest_hour"].to_dict()
                        if r["fully_loaded_at_busiest_hour"]
                        else None,
                        "marginal_per_million_output_tokens": r["marginal"].to_dict(),
                    }
                    for r in rows
                ],
            }
        )
