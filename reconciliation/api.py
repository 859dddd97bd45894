"""`reconciliation` (docs/contract.md §7): findings with evidence and recommended actions. Operators and
approvers see all and accept or dismiss (a reason is required); tenant members read their own; another
tenant's finding is a 404. `reconciliation/runs` asks for a run (operators, approvers)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import exceptions, generics, serializers, status
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from entitlements import roles
from reconciliation import services
from reconciliation.models import Finding


class FindingOut(serializers.ModelSerializer):
    entitlement = serializers.UUIDField(source="entitlement.uuid")
    tenant: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    run = serializers.UUIDField(source="run_id", allow_null=True)
    acted_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Finding
        fields = ["id", "kind", "state", "entitlement", "tenant", "pool", "window_start", "window_end", "evidence"]
        fields += ["action", "cu_delta", "recommended", "created_at", "updated_at", "acted_by", "acted_at", "reason"]
        fields += ["run"]


class Reads(BasePermission):
    def has_permission(self, request: Any, view: Any) -> bool:
        r = roles.roles_of(request.user)
        if request.method in ("GET", "HEAD", "OPTIONS"):
            return bool(r & {roles.VIEWER, roles.REQUESTER, roles.APPROVER, roles.OPERATOR})
        return services.may_act(request.user)


class FindingList(generics.ListAPIView):
    permission_classes = [Reads]
    serializer_class = FindingOut
    pagination_class = None

    def get_queryset(self) -> Any:
        qs = services.visible_findings(self.request.user)
        for key in ("state", "kind"):
            value = self.request.query_params.get(key)
            if value:
                allowed = (Finding.State if key == "state" else Finding.Kind).values
                if value not in allowed:
                    raise exceptions.ValidationError({key: f"one of {', '.join(allowed)}"})
                qs = qs.filter(**{key: value})
        return qs.order_by("-created_at")


def _get(request: Request, finding: Any) -> Finding:
    f = services.visible_findings(request.user).filter(pk=finding).first()
    if f is None:
        raise exceptions.NotFound("no such finding")
    return f


class FindingDetail(APIView):
    permission_classes = [Reads]

    @extend_schema(responses=FindingOut)
    def get(self, request: Request, finding: Any) -> Response:
        return Response(FindingOut(_get(request, finding)).data)


_ActIn = inline_serializer("FindingActIn", {"reason": serializers.CharField()})


class _Act(APIView):
    permission_classes = [Reads]
    act: Any = None

    @extend_schema(request=_ActIn, responses=FindingOut)
    def post(self, request: Request, finding: Any) -> Response:
        f = _get(request, finding)
        reason = request.data.get("reason") if isinstance(request.data, dict) else None
        try:
            f = type(self).act(actor=request.user, finding=f, reason=reason or "")
        except services.FindingError as e:
            code = status.HTTP_409_CONFLICT if e.field == "state" else status.HTTP_400_BAD_REQUEST
            return Response({e.field: [e.message]}, status=code)
        return Response(FindingOut(f).data)


class FindingAccept(_Act):
    act = staticmethod(services.finding_accept)


class FindingDismiss(_Act):
    act = staticmethod(services.finding_dismiss)


class RunRequest(APIView):
    permission_classes = [Reads]

    @extend_schema(request=None, responses=inline_serializer("ReconciliationRunOut", {"id": serializers.UUIDField(),
                   "status": serializers.CharField()}))  # fmt: skip
    def post(self, request: Request) -> Response:
        run = services.run_request(requested_by=request.user)
        run.refresh_from_db()
        return Response({"id": str(run.pk), "status": run.status}, status=status.HTTP_202_ACCEPTED)
