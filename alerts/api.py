"""Read endpoints (docs/contract.md §7): `alerts` (rules with their recent episodes) and `webhooks`
(endpoints with their delivery log). Approvers and operators see all; tenant members their own;
another tenant's object is a 404. Secrets never leave through the API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from alerts.models import AlertEpisode, AlertRule, WebhookDelivery, WebhookEndpoint
from alerts.selectors import deliveries_of, endpoints_visible_to, episodes_of, rules_visible_to
from entitlements.permissions import MemberReadOperatorWrite


class EpisodeOut(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid")

    class Meta:
        model = AlertEpisode
        fields = ["id", "subject_key", "summary", "detail", "opened_at", "resolved_at"]


class RuleOut(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid")
    tenant: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    pool: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    episodes = serializers.SerializerMethodField()

    class Meta:
        model = AlertRule
        fields = ["id", "name", "scope", "tenant", "pool", "kind", "threshold", "window_minutes", "enabled"]
        fields += ["channels", "created_at", "episodes"]

    def get_episodes(self, rule: AlertRule) -> list[dict[str, Any]]:
        return EpisodeOut(episodes_of(rule, limit=self.context.get("episodes", 5)), many=True).data  # type: ignore[return-value]


class DeliveryOut(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = ["event_id", "event_type", "attempt", "status", "status_code", "error"]
        fields += ["next_attempt_at", "attempted_at", "delivered_at", "duration_ms"]


class EndpointOut(serializers.ModelSerializer):
    id = serializers.UUIDField(source="uuid")
    tenant: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = WebhookEndpoint
        fields = ["id", "name", "tenant", "url", "enabled", "created_at"]


class EndpointDetailOut(EndpointOut):
    deliveries = serializers.SerializerMethodField()

    class Meta(EndpointOut.Meta):
        fields = [*EndpointOut.Meta.fields, "deliveries"]

    def get_deliveries(self, ep: WebhookEndpoint) -> list[dict[str, Any]]:
        return DeliveryOut(deliveries_of(ep), many=True).data  # type: ignore[return-value]


class AlertRuleList(generics.ListAPIView):
    permission_classes = [MemberReadOperatorWrite]
    serializer_class = RuleOut
    pagination_class = None

    def get_queryset(self) -> Any:
        return rules_visible_to(self.request.user).order_by("scope", "name")


class AlertRuleDetail(APIView):
    permission_classes = [MemberReadOperatorWrite]

    @extend_schema(responses=RuleOut)
    def get(self, request: Request, rule: str) -> Response:
        r = rules_visible_to(request.user).filter(uuid=rule).first()
        if r is None:
            raise exceptions.NotFound("no such alert rule")
        return Response(RuleOut(r, context={"episodes": 50}).data)


class WebhookList(generics.ListAPIView):
    permission_classes = [MemberReadOperatorWrite]
    serializer_class = EndpointOut
    pagination_class = None

    def get_queryset(self) -> Any:
        return endpoints_visible_to(self.request.user)


class WebhookDetail(APIView):
    permission_classes = [MemberReadOperatorWrite]

    @extend_schema(responses=EndpointDetailOut)
    def get(self, request: Request, endpoint: str) -> Response:
        ep = endpoints_visible_to(request.user).filter(uuid=endpoint).first()
        if ep is None:
            raise exceptions.NotFound("no such webhook endpoint")
        return Response(EndpointDetailOut(ep).data)
