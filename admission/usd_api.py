"""`/api/v1/usd-budgets` (issue 51.3): each $ budget with what the month has charged and holds, read
from the admission store (what admission enforces, not a lagging rollup); operators set them.

GET: operators and approvers see every budget; a tenant member their own tenant's. PUT (operators):
`{tenant, project?, budget_usd (null removes it), reason}`; bad input is a 400 naming the field."""

from __future__ import annotations

import time
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from admission import usd
from admission.backends import get_backend
from admission.backends.base import StoreUnavailable
from entitlements import roles
from entitlements.models import Project, Tenant
from entitlements.permissions import MemberReadOperatorWrite
from entitlements.usd_budget_services import UsdBudgetError, set_usd_budget


def _row(tenant: str, project: str, limit: float, month: str) -> dict[str, Any]:
    backend = get_backend()
    got: tuple[float, float] | None
    try:
        got = backend.usd_spent(usd.account_key(backend.prefix, tenant, project, month))
    except StoreUnavailable:
        got = None
    spent, held = got or (0.0, 0.0)
    return {
        "tenant": tenant, "project": project or None, "budget_usd": limit, "month": month,
        "charged_usd": round(spent, 6), "held_usd": round(held, 6),
        "remaining_usd": round(max(0.0, limit - spent - held), 6), "used_pct": round(100 * (spent + held) / limit, 2)
        if limit else 100.0,
    }  # fmt: skip


_ROW = inline_serializer(
    "UsdBudgetRow",
    {
        "tenant": serializers.CharField(), "project": serializers.CharField(allow_null=True),
        "budget_usd": serializers.FloatField(), "month": serializers.CharField(),
        "charged_usd": serializers.FloatField(), "held_usd": serializers.FloatField(),
        "remaining_usd": serializers.FloatField(), "used_pct": serializers.FloatField(),
    },
)  # fmt: skip
_LIST = inline_serializer("UsdBudgets", {"month": serializers.CharField(), "results": _ROW.__class__(many=True)})
_SET = inline_serializer(
    "UsdBudgetSet",
    {
        "tenant": serializers.CharField(), "project": serializers.CharField(required=False, allow_null=True),
        "budget_usd": serializers.FloatField(allow_null=True), "reason": serializers.CharField(),
    },
)  # fmt: skip
_SET_ANSWER = inline_serializer(
    "UsdBudgetSetAnswer",
    {
        "tenant": serializers.CharField(), "project": serializers.CharField(allow_null=True),
        "budget_usd": serializers.FloatField(allow_null=True), "previous_usd": serializers.FloatField(allow_null=True),
        "reason": serializers.CharField(),
    },
)  # fmt: skip


class UsdBudgetsView(APIView):
    permission_classes = [MemberReadOperatorWrite]

    @extend_schema(responses=_LIST)
    def get(self, request: Request) -> Response:
        month = usd.month_id(time.time())
        mine = roles.tenant_of(request.user)
        ts = Tenant.objects.filter(budget_usd__isnull=False)
        ps = Project.objects.filter(budget_usd__isnull=False).select_related("tenant")
        if mine is not None:
            ts, ps = ts.filter(pk=mine.pk), ps.filter(tenant=mine)
        rows = [_row(t.slug, "", float(t.budget_usd or 0), month) for t in ts]
        rows += [_row(p.tenant.slug, p.slug, float(p.budget_usd or 0), month) for p in ps]
        return Response({"month": month, "results": rows})

    @extend_schema(request=_SET, responses=_SET_ANSWER)
    def put(self, request: Request) -> Response:
        data = request.data if isinstance(request.data, dict) else {}
        if "budget_usd" not in data:
            raise ValidationError({"budget_usd": ["required: dollars per month, or null to remove the budget"]})
        try:
            ch = set_usd_budget(actor=request.user, tenant=data.get("tenant"), project=data.get("project") or None,
                                budget_usd=data.get("budget_usd"), reason=data.get("reason"))  # fmt: skip
        except UsdBudgetError as exc:
            raise ValidationError({exc.field: [exc.message]}) from exc
        return Response({"tenant": ch.tenant.slug, "project": ch.project.slug if ch.project else None,
                         "budget_usd": ch.new_usd, "previous_usd": ch.old_usd, "reason": ch.reason})  # fmt: skip
