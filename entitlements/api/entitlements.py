"""Entitlements: tenant members read their own tenant's, approvers and operators read all,
operators grant, amend and revoke through entitlements.services (with a reason, kept in history).
"""

from __future__ import annotations

import math
from typing import Any

from django.utils import timezone
from django_filters import rest_framework as filters
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response

from capacity.envelope import ENVELOPE_ORDER
from capacity.ordering import ordering_errors
from entitlements import limits, roles, services
from entitlements.activity import is_active
from entitlements.api.history import history_for
from entitlements.concurrency import max_concurrency_derivation
from entitlements.models import Entitlement, Pool, Project, Region, ServedModel, Tenant, TrafficClass
from entitlements.models.grants import MAX_WEIGHT
from entitlements.selectors import active_at, entitlements_visible_to
from entitlements.services import ENVELOPE_FIELDS
from http_plumbing.fields import NumberField

CU_FIELD: dict[str, Any] = {"max_digits": 14, "decimal_places": 3, "coerce_to_string": False}


class EntitlementPermission(BasePermission):
    """Members and staff read; operators write.

    A tenant member's write on a single entitlement passes this first gate so that the lookup
    runs first: another tenant's entitlement is then a 404, and their own one a 403.
    """

    readers = frozenset({roles.VIEWER, roles.REQUESTER, roles.APPROVER, roles.OPERATOR})

    def has_permission(self, request: Any, view: Any) -> bool:
        r = roles.roles_of(request.user)
        if request.method in SAFE_METHODS:
            return bool(r & self.readers)
        return roles.OPERATOR in r or bool(getattr(view, "detail", False) and r & self.readers)

    def has_object_permission(self, request: Any, view: Any, obj: Any) -> bool:
        return request.method in SAFE_METHODS or roles.OPERATOR in roles.roles_of(request.user)


class HistoryEntrySerializer(serializers.Serializer):
    op = serializers.CharField()
    version = serializers.IntegerField(allow_null=True)
    actor = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    at = serializers.DateTimeField()
    changes = serializers.DictField(child=serializers.DictField(), help_text="field → {from, to}")


class EntitlementSerializer(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid", read_only=True)
    tenant: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    project: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    region: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    traffic_class = serializers.CharField(source="traffic_class_id", read_only=True)
    cu = serializers.DecimalField(**CU_FIELD, read_only=True)
    borrowing_limit_cu = serializers.DecimalField(**CU_FIELD, read_only=True)
    lending_limit_cu = serializers.DecimalField(**CU_FIELD, read_only=True, allow_null=True)
    weight = serializers.FloatField(read_only=True, allow_null=True)
    spillover_target: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="uuid", read_only=True, allow_null=True
    )
    spillover_budget_cu = serializers.DecimalField(**CU_FIELD, read_only=True, allow_null=True)
    # CONTRACT.md §5 names them `spillover: {target, budget}` and `lending_limit`: the same values.
    spillover = serializers.SerializerMethodField()
    lending_limit = serializers.DecimalField(**CU_FIELD, source="lending_limit_cu", read_only=True, allow_null=True)
    rate_wt_per_s = serializers.FloatField(read_only=True)
    active = serializers.SerializerMethodField()
    history = serializers.SerializerMethodField()
    max_concurrency_derivation = serializers.SerializerMethodField()

    class Meta:
        model = Entitlement
        fields = [
            "id", "tenant", "project", "model", "region", "pool", "traffic_class", "cu", "rate_wt_per_s",
            "starts_at", "ends_at", *ENVELOPE_FIELDS, "max_concurrency_derivation", "overage", "borrowing_limit_cu",
            "lending_limit_cu", "lending_limit", "weight", "spillover", "spillover_target", "spillover_budget_cu", "overflow", *limits.LIMIT_FIELDS, "term", "committed_until", "version", "active", "revoked_at", "created_at", "updated_at", "history",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "nullable": True,
            "properties": {"target": {"type": "string", "format": "uuid"}, "budget": {"type": "number"}},
        }
    )
    def get_spillover(self, obj: Entitlement) -> dict[str, Any] | None:
        target = obj.spillover_target
        if target is None or obj.spillover_budget_cu is None:
            return None
        return {"target": str(target.uuid), "budget": float(obj.spillover_budget_cu)}

    def get_active(self, obj: Entitlement) -> bool:
        now = self.context.get("now") or timezone.now()
        return is_active(obj.starts_at, obj.ends_at, obj.revoked_at, now)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_max_concurrency_derivation(self, obj: Entitlement) -> dict[str, object] | None:
        """Issue 15.5: the derived default cap (Little's law × burst, capped by the KV share) beside the
        stored one; `overridden` when an operator set another (entitlement_amend, with a reason)."""
        return max_concurrency_derivation(obj, self.context.setdefault("pools_for_caps", {}))  # type: ignore[attr-defined]  # a dict; typed Mapping

    @extend_schema_field(HistoryEntrySerializer(many=True))
    def get_history(self, obj: Entitlement) -> Any:
        histories = self.context.get("histories")
        entries = histories.get(obj.pk, []) if histories is not None else history_for([obj.pk])[obj.pk]
        return HistoryEntrySerializer(entries, many=True).data


class _EnvelopeRules(serializers.Serializer):
    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: self.unknown_message})
        merged = {**self.current(), **attrs}
        # The envelope's lengths are ordered; the error names the higher field (the one usually amended).
        disordered = ordering_errors(merged, ENVELOPE_ORDER, blame="higher")
        if disordered:
            raise serializers.ValidationError(disordered)
        if "starts_at" in merged and merged.get("ends_at") is not None and merged["ends_at"] <= merged["starts_at"]:
            raise serializers.ValidationError({"ends_at": "must be after starts_at"})
        return attrs

    unknown_message = "unknown field"

    def current(self) -> dict[str, Any]:
        return {}


class _LimitFields(serializers.Serializer):
    """Budgets and the request rate (entitlements.limits); null clears one. Cross-field rules
    (burst needs max_rps) are the model's, so the API and every other writer share them."""

    daily_budget = serializers.IntegerField(min_value=0, max_value=limits.MAX_BUDGET, required=False, allow_null=True)
    monthly_budget = serializers.IntegerField(min_value=0, max_value=limits.MAX_BUDGET, required=False, allow_null=True)
    budget_unit = serializers.ChoiceField(choices=limits.UNIT_CHOICES, required=False)
    budget_tz = serializers.CharField(max_length=64, required=False, validators=[limits.validate_tz])
    max_rps = serializers.FloatField(max_value=limits.MAX_RPS, required=False, allow_null=True)
    burst = serializers.IntegerField(min_value=1, max_value=2**31 - 1, required=False, allow_null=True)

    def validate_max_rps(self, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise serializers.ValidationError("must be greater than 0")
        return value


class _LendingFields(serializers.Serializer):
    """Lending and fair share (issue 36.3, docs/contract.md §5): the ranges here; which class may carry
    which (a lending limit only on reserved/shared, at most the CU; a weight only on best_effort with
    overage borrow) is the model's rule (Entitlement.lending_errors), so every writer shares it. null clears one."""

    lending_limit_cu = serializers.DecimalField(
        max_digits=14, decimal_places=3, min_value=0, required=False, allow_null=True,
        help_text="reserved/shared: CU lent at most (0 ≤ limit ≤ cu); null: all idle",
    )  # fmt: skip
    weight = NumberField(
        required=False, allow_null=True, max_value=MAX_WEIGHT,
        help_text="best_effort: fair-share weight of contended lendable room (0 < weight ≤ 1000); null: 1",
    )  # fmt: skip

    lending_limit = serializers.DecimalField(
        max_digits=14, decimal_places=3, min_value=0, required=False, allow_null=True,
        help_text="CONTRACT.md's name for lending_limit_cu (give one of them)",
    )  # fmt: skip

    def validate_weight(self, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise serializers.ValidationError("must be greater than 0")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return super().validate(_alias(attrs, "lending_limit", {"lending_limit_cu": lambda v: v}))


# The stored bound is 14 digits with 3 decimals; a budget a million times any pool is a typo, not a plan.
MAX_SPILLOVER_CU = 1e9


def _alias(attrs: dict[str, Any], name: str, parts: dict[str, Any]) -> dict[str, Any]:
    """CONTRACT.md's name `name` for the stored field(s) in `parts` (field → how to read it from the value):
    given alone it sets them; given beside a stored name with another value it is a 400 naming `name`."""
    if name not in attrs:
        return attrs
    value = attrs.pop(name)
    for field, read in parts.items():
        v = None if value is None else read(value)
        if field in attrs and attrs[field] != v:
            raise serializers.ValidationError({name: f"says otherwise than {field}: give one of them"})
        attrs[field] = v
    return attrs


def _positive_budget(value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise serializers.ValidationError("must be a number greater than 0")
    return value


class _SpilloverObject(serializers.Serializer):
    """CONTRACT.md §5 `spillover: {target, budget}` (both required; `spillover: null` clears both)."""

    target = serializers.SlugRelatedField(slug_field="uuid", queryset=Entitlement.objects.all())
    budget = NumberField(max_value=MAX_SPILLOVER_CU, help_text="CU of spillover at most; > 0")

    def validate_budget(self, value: float | None) -> float | None:
        return _positive_budget(value)


class _SpilloverFields(serializers.Serializer):
    """Spillover (issue 36.1, docs/contract.md §5 `spillover: {target, budget}`): the ranges here; which
    target is allowed (same tenant and model, not itself, another pool or best_effort) is the model's
    rule (Entitlement.spillover_errors), so every writer shares it. null clears one."""

    spillover_target = serializers.SlugRelatedField(
        slug_field="uuid", queryset=Entitlement.objects.all(), required=False, allow_null=True,
        help_text="id of the entitlement served when this one's bucket is empty (same tenant and model)",
    )  # fmt: skip
    spillover_budget_cu = NumberField(
        required=False, allow_null=True, max_value=MAX_SPILLOVER_CU,
        help_text="CU of spillover at most (a bucket of budget × R wt/s, 60 s deep); > 0",
    )  # fmt: skip
    overflow = serializers.ChoiceField(choices=Entitlement.Overflow.choices, required=False)
    spillover = _SpilloverObject(required=False, allow_null=True, help_text="CONTRACT.md's shape of the two above")

    def validate_spillover_budget_cu(self, value: float | None) -> float | None:
        return _positive_budget(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        parts = {"spillover_target": lambda v: v["target"], "spillover_budget_cu": lambda v: v["budget"]}
        return super().validate(_alias(attrs, "spillover", parts))


class _EnvelopeRequired(_EnvelopeRules):
    max_prompt_tokens = serializers.IntegerField(min_value=0)
    max_output_tokens = serializers.IntegerField(min_value=0)
    prompt_p50 = serializers.IntegerField(min_value=0)
    prompt_p95 = serializers.IntegerField(min_value=0)
    output_p50 = serializers.IntegerField(min_value=0)
    output_p95 = serializers.IntegerField(min_value=0)
    # Absent: derived from Little's law and the pool's KV room (max_concurrency_derivation says how).
    max_concurrency = serializers.IntegerField(min_value=1, required=False)
    ttft_p99_ms = serializers.IntegerField(min_value=0)
    tpot_p99_ms = serializers.IntegerField(min_value=0)
    streaming = serializers.BooleanField(required=False)


class _EnvelopeOptional(_EnvelopeRules):
    max_prompt_tokens = serializers.IntegerField(min_value=0, required=False)
    max_output_tokens = serializers.IntegerField(min_value=0, required=False)
    prompt_p50 = serializers.IntegerField(min_value=0, required=False)
    prompt_p95 = serializers.IntegerField(min_value=0, required=False)
    output_p50 = serializers.IntegerField(min_value=0, required=False)
    output_p95 = serializers.IntegerField(min_value=0, required=False)
    max_concurrency = serializers.IntegerField(min_value=1, required=False)
    ttft_p99_ms = serializers.IntegerField(min_value=0, required=False)
    tpot_p99_ms = serializers.IntegerField(min_value=0, required=False)
    streaming = serializers.BooleanField(required=False)


class EntitlementCreateSerializer(_LimitFields, _LendingFields, _SpilloverFields, _EnvelopeRequired):
    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    project = serializers.CharField(required=False, allow_null=True, help_text="project slug within the tenant")
    model = serializers.SlugRelatedField(slug_field="slug", queryset=ServedModel.objects.all())
    region = serializers.SlugRelatedField(slug_field="slug", queryset=Region.objects.all())
    pool = serializers.SlugRelatedField(slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True)
    traffic_class = serializers.SlugRelatedField(slug_field="slug", queryset=TrafficClass.objects.all())
    cu = serializers.DecimalField(max_digits=14, decimal_places=3)
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField(required=False, allow_null=True)
    overage = serializers.ChoiceField(choices=Entitlement.Overage.choices, default=Entitlement.Overage.THROTTLE)
    borrowing_limit_cu = serializers.DecimalField(
        max_digits=14,
        decimal_places=3,
        min_value=0,
        default=0,  # type: ignore[arg-type]  # 0 is stored as Decimal 0
    )
    reason = serializers.CharField(max_length=2000)

    def validate_cu(self, value: Any) -> Any:
        if value <= 0:
            raise serializers.ValidationError("must be greater than 0")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        slug = attrs.get("project")
        if slug:
            project = Project.objects.filter(tenant=attrs["tenant"], slug=slug).first()
            if project is None:
                raise serializers.ValidationError({"project": f"tenant {attrs['tenant'].slug} has no project '{slug}'"})
            attrs["project"] = project
        else:
            attrs["project"] = None
        return attrs


class EntitlementAmendSerializer(_LimitFields, _LendingFields, _SpilloverFields, _EnvelopeOptional):
    unknown_message = "cannot be amended; revoke and grant instead"
    cu = serializers.DecimalField(max_digits=14, decimal_places=3, min_value=0, required=False)
    starts_at = serializers.DateTimeField(required=False)
    ends_at = serializers.DateTimeField(required=False, allow_null=True)
    overage = serializers.ChoiceField(choices=Entitlement.Overage.choices, required=False)
    borrowing_limit_cu = serializers.DecimalField(max_digits=14, decimal_places=3, min_value=0, required=False)
    reason = serializers.CharField(max_length=2000)

    def current(self) -> dict[str, Any]:
        ent = self.context["entitlement"]
        return {k: getattr(ent, k) for k in [*ENVELOPE_FIELDS, "starts_at", "ends_at"]}


class RevokeSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=2000)
    at = serializers.DateTimeField(required=False, help_text="default: now")


class EntitlementFilter(filters.FilterSet):
    tenant = filters.CharFilter(field_name="tenant__slug")
    project = filters.CharFilter(field_name="project__slug")
    model = filters.CharFilter(field_name="model__slug")
    region = filters.CharFilter(field_name="region__slug")
    pool = filters.CharFilter(field_name="pool__slug")
    traffic_class = filters.CharFilter(field_name="traffic_class_id")
    active = filters.BooleanFilter(method="filter_active", help_text="active now (started, not ended, not revoked)")

    class Meta:
        model = Entitlement
        fields = ["tenant", "project", "model", "region", "pool", "traffic_class", "active"]

    def filter_active(self, queryset: Any, name: str, value: bool | None) -> Any:
        if value is None:
            return queryset
        live = active_at(queryset, timezone.now())
        return live if value else queryset.exclude(pk__in=live.values("pk"))


class EntitlementViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    permission_classes = [EntitlementPermission]
    serializer_class = EntitlementSerializer
    filterset_class = EntitlementFilter
    lookup_field = "uuid"
    lookup_url_kwarg = "id"
    lookup_value_converter = "uuid"
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self) -> Any:
        return entitlements_visible_to(self.request.user).select_related("spillover_target")

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now()}

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        rows = list(page if page is not None else [])
        ctx = {**self.get_serializer_context(), "histories": history_for(e.pk for e in rows)}
        return self.get_paginated_response(EntitlementSerializer(rows, many=True, context=ctx).data)

    def _render(self, ent: Entitlement, code: int = status.HTTP_200_OK) -> Response:
        fresh = self.get_queryset().get(pk=ent.pk)
        return Response(EntitlementSerializer(fresh, context=self.get_serializer_context()).data, status=code)

    @extend_schema(request=EntitlementCreateSerializer, responses={201: EntitlementSerializer})
    def create(self, request: Request) -> Response:
        inp = EntitlementCreateSerializer(data=request.data)
        inp.is_valid(raise_exception=True)
        d = dict(inp.validated_data)
        d.setdefault("max_concurrency", services.DERIVE)
        envelope = services.Envelope(**{k: d.pop(k) for k in ENVELOPE_FIELDS if k in d})
        ent = services.entitlement_grant(
            actor=request.user,
            reason=d.pop("reason"),
            traffic_class=d.pop("traffic_class").slug,
            envelope=envelope,
            ends_at=d.pop("ends_at", None),
            **d,
        )
        return self._render(ent, status.HTTP_201_CREATED)

    @extend_schema(request=EntitlementAmendSerializer, responses=EntitlementSerializer)
    def partial_update(self, request: Request, id: str) -> Response:
        ent = self.get_object()
        inp = EntitlementAmendSerializer(data=request.data, context={"entitlement": ent})
        inp.is_valid(raise_exception=True)
        changes = dict(inp.validated_data)
        reason = changes.pop("reason")
        ent = services.entitlement_amend(actor=request.user, reason=reason, entitlement=ent, **changes)
        return self._render(ent)

    def _revoke(self, request: Request) -> Response:
        ent = self.get_object()
        data = request.data if request.data else request.query_params
        inp = RevokeSerializer(data=data)
        inp.is_valid(raise_exception=True)
        d = inp.validated_data
        ent = services.entitlement_revoke(actor=request.user, reason=d["reason"], entitlement=ent, at=d.get("at"))
        return self._render(ent)

    @extend_schema(
        request=RevokeSerializer,
        responses=EntitlementSerializer,
        parameters=[OpenApiParameter("reason", str, description="why (or in the body)")],
    )
    def destroy(self, request: Request, id: str) -> Response:
        """Revoke (the row stays, with its history): reason in the body or `?reason=`."""
        return self._revoke(request)

    @extend_schema(request=RevokeSerializer, responses=EntitlementSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, id: str) -> Response:
        return self._revoke(request)
