"""Pools: supply with its deliverable terms, sold and headroom now, and the reserves around it.

Approvers and operators read; operators change a pool's shape and its reserves.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.http import Http404
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from entitlements import pool_alert_source, pool_services, services
from entitlements.models import FailoverReserve, Pool, Project, Tenant, TrafficClass, Zone
from entitlements.permissions import StaffReadOperatorWrite
from entitlements.selectors import pools_with_totals

NUM: dict[str, Any] = {"max_digits": 14, "decimal_places": 3, "coerce_to_string": False, "read_only": True}


def _protects(res: FailoverReserve) -> dict[str, str]:
    out = {"pool": res.protected_pool.slug}
    if res.protected_zone is not None:
        out["zone"] = res.protected_zone.slug
    return out


def protecting_map() -> dict[int, list[dict[str, Any]]]:
    """Reserves held elsewhere for each pool, in one query. Every reserve names the one pool it
    stands for (a zone reserve: that pool's replicas in the zone), so each is listed once."""
    out: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = FailoverReserve.objects.order_by("pk").values_list(
        "id", "cu", "host_pool__slug", "protected_pool_id", "protected_pool__slug", "protected_zone__slug"
    )
    for rid, cu, host_slug, pool_id, pool_slug, zone_slug in rows:
        protects = {"pool": pool_slug} if zone_slug is None else {"pool": pool_slug, "zone": zone_slug}
        out[pool_id].append({"id": rid, "host_pool": host_slug, "protects": protects, "cu": cu})
    return out


class ZoneReplicasSerializer(serializers.Serializer):
    zone = serializers.SlugRelatedField(slug_field="slug", queryset=Zone.objects.all())
    replicas = serializers.IntegerField(min_value=0)


class BreakdownSerializer(serializers.Serializer):
    physical = serializers.FloatField()
    failover_reserve = serializers.FloatField()
    maintenance = serializers.FloatField()
    safety = serializers.FloatField()
    fragmentation = serializers.FloatField()
    deliverable = serializers.FloatField()


class ReserveOutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    host_pool = serializers.CharField()
    protects = serializers.DictField(child=serializers.CharField(allow_null=True))
    cu = serializers.DecimalField(**NUM)


class ReservesSerializer(serializers.Serializer):
    held = ReserveOutSerializer(many=True)
    protecting_this = ReserveOutSerializer(many=True)


class PoolAlertSerializer(serializers.Serializer):
    alertname = serializers.CharField()
    kind = serializers.CharField(help_text="supply (takes replicas out of health while firing) or load (evidence)")
    state = serializers.CharField()
    starts_at = serializers.DateTimeField()
    ends_at = serializers.DateTimeField(allow_null=True)
    labels = serializers.DictField(child=serializers.CharField())
    summary = serializers.CharField()
    fingerprint = serializers.CharField()


class PoolSerializer(serializers.Serializer):
    """Renders one row of selectors.pools_with_totals plus the reserves around it."""

    slug = serializers.CharField(source="pool.slug")
    model = serializers.CharField(source="pool.model.slug")
    region = serializers.CharField(source="pool.region.slug")
    accelerator = serializers.CharField(source="pool.accelerator.slug")
    operating_point = serializers.IntegerField(source="pool.operating_point_id")
    accelerators_per_replica = serializers.IntegerField(source="pool.accelerators_per_replica")
    zones = serializers.SerializerMethodField()
    replicas = serializers.IntegerField(source="pool.replicas")
    maintenance_pct = serializers.FloatField(source="pool.maintenance_pct")
    safety_pct = serializers.FloatField(source="pool.safety_pct")
    fragmentation_pct = serializers.FloatField(source="pool.fragmentation_pct")
    failure_policy = serializers.CharField(source="pool.failure_policy")
    cu_per_replica = serializers.FloatField(source="pool.cu_per_replica")
    physical_cu = serializers.DecimalField(**NUM)
    deliverable_cu = serializers.DecimalField(**NUM)
    sold_cu = serializers.DecimalField(**NUM)
    headroom_cu = serializers.DecimalField(**NUM)
    breakdown = serializers.SerializerMethodField()
    reserves = serializers.SerializerMethodField()
    alerts = serializers.SerializerMethodField()

    @extend_schema_field(PoolAlertSerializer(many=True))
    def get_alerts(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        """Alertmanager alerts on the pool (issue 24), firing first; only on `pools/{slug}` (the list omits them)."""
        if not self.context.get("with_alerts"):
            return []  # dropped by to_representation; not read for every pool of the list
        return PoolAlertSerializer(pool_alert_source.alerts_for(row["pool"]), many=True).data  # type: ignore[return-value]

    def to_representation(self, instance: Any) -> Any:
        data = super().to_representation(instance)
        if not self.context.get("with_alerts"):
            data.pop("alerts", None)
        return data

    @extend_schema_field(ZoneReplicasSerializer(many=True))
    def get_zones(self, row: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"zone": z.zone.slug, "replicas": z.replicas} for z in row["pool"].zones.all()]

    @extend_schema_field(BreakdownSerializer)
    def get_breakdown(self, row: dict[str, Any]) -> dict[str, float]:
        b = row["breakdown"]
        return {
            "physical": b.physical,
            "failover_reserve": b.failover_reserve,
            "maintenance": b.maintenance,
            "safety": b.safety,
            "fragmentation": b.fragmentation,
            "deliverable": b.deliverable,
        }

    @extend_schema_field(ReservesSerializer)
    def get_reserves(self, row: dict[str, Any]) -> dict[str, Any]:
        pool = row["pool"]
        held = [
            {"id": r.pk, "host_pool": pool.slug, "protects": _protects(r), "cu": r.cu} for r in pool.reserves_held.all()
        ]
        protecting = self.context["protecting"].get(pool.pk, [])
        return ReservesSerializer({"held": held, "protecting_this": protecting}).data


class PoolPatchSerializer(serializers.Serializer):
    maintenance_pct = serializers.FloatField(min_value=0, max_value=100, required=False)
    safety_pct = serializers.FloatField(min_value=0, max_value=100, required=False)
    fragmentation_pct = serializers.FloatField(min_value=0, max_value=100, required=False)
    failure_policy = serializers.CharField(max_length=32, required=False)
    zones = ZoneReplicasSerializer(many=True, required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(self.initial_data) - set(self.fields))
        if unknown:
            raise serializers.ValidationError({unknown[0]: "cannot be changed here"})
        return attrs


class ReserveInSerializer(serializers.Serializer):
    protected_pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )
    protected_zone = serializers.SlugRelatedField(
        slug_field="slug", queryset=Zone.objects.all(), required=False, allow_null=True
    )
    cu = serializers.DecimalField(max_digits=14, decimal_places=3, min_value=0)
    note = serializers.CharField(max_length=200, required=False, default="", allow_blank=True)


class ScopeMoveSerializer(serializers.Serializer):
    """One admission scope; its model and region are the target pool's."""

    tenant = serializers.SlugRelatedField(slug_field="slug", queryset=Tenant.objects.all())
    project = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    traffic_class = serializers.SlugRelatedField(slug_field="slug", queryset=TrafficClass.objects.all())
    reason = serializers.CharField(max_length=2000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        slug = attrs.get("project")
        attrs["project"] = Project.objects.filter(tenant=attrs["tenant"], slug=slug).first() if slug else None
        if slug and attrs["project"] is None:
            raise serializers.ValidationError({"project": f"tenant {attrs['tenant'].slug} has no project '{slug}'"})
        return attrs


class ScopeMovedSerializer(serializers.Serializer):
    pool = serializers.CharField()
    moved = serializers.ListField(child=serializers.UUIDField())


class PoolViewSet(viewsets.GenericViewSet):
    permission_classes = [StaffReadOperatorWrite]
    serializer_class = PoolSerializer
    lookup_field = "slug"
    lookup_value_converter = "dotslug"  # http_plumbing.url_converters: dots too
    queryset = Pool.objects.all()
    filter_backends: list[type] = []

    def _rows(self, slug: str | None = None) -> list[dict[str, Any]]:
        rows = pools_with_totals()
        if slug is not None:
            rows = [r for r in rows if r["pool"].slug == slug]
            if not rows:
                raise Http404
        return rows

    def _render(self, rows: list[dict[str, Any]], *, many: bool) -> Any:
        ctx = {**self.get_serializer_context(), "protecting": protecting_map(), "with_alerts": not many}
        return PoolSerializer(rows if many else rows[0], many=many, context=ctx).data

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self._rows())
        return self.get_paginated_response(self._render(page or [], many=True))

    def retrieve(self, request: Request, slug: str) -> Response:
        return Response(self._render(self._rows(slug), many=False))

    @extend_schema(request=PoolPatchSerializer, responses=PoolSerializer)
    def partial_update(self, request: Request, slug: str) -> Response:
        pool = self.get_object()
        inp = PoolPatchSerializer(data=request.data)
        inp.is_valid(raise_exception=True)
        data = dict(inp.validated_data)
        zones = [(z["zone"], z["replicas"]) for z in data.pop("zones", [])]
        pool_services.pool_update(pool=pool, zones=zones, **data)
        return Response(self._render(self._rows(slug), many=False))

    @extend_schema(request=ReserveInSerializer, responses=PoolSerializer)
    @action(detail=True, methods=["post"])
    def reserves(self, request: Request, slug: str) -> Response:
        """Create, resize or (cu 0) remove the reserve this pool holds for one pool of its model, or for
        that pool's replicas in one zone (a zone alone names the pool when only one fits)."""
        pool = self.get_object()
        inp = ReserveInSerializer(data=request.data)
        inp.is_valid(raise_exception=True)
        d = inp.validated_data
        services.reserve_set(
            host_pool=pool,
            cu=d["cu"],
            protected_pool=d.get("protected_pool"),
            protected_zone=d.get("protected_zone"),
            note=d["note"],
        )
        return Response(self._render(self._rows(slug), many=False), status=status.HTTP_200_OK)

    @extend_schema(request=ScopeMoveSerializer, responses=ScopeMovedSerializer)
    @action(detail=True, methods=["post"], url_path="move-scope")
    def move_scope(self, request: Request, slug: str) -> Response:
        """Move a whole admission scope here (docs/contract.md §5: one scope, one pool); 409 when it does not fit."""
        pool = self.get_object()
        inp = ScopeMoveSerializer(data=request.data)
        inp.is_valid(raise_exception=True)
        d = inp.validated_data
        moved = services.scope_move(
            actor=request.user,
            reason=d["reason"],
            tenant=d["tenant"],
            project=d["project"],
            traffic_class=d["traffic_class"].slug,
            to_pool=pool,
        )
        return Response({"pool": pool.slug, "moved": [str(e.uuid) for e in moved]})
