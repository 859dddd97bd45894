"""One input and one output serializer per write; outputs carry sizing and the activity feed."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from capacity.minute_cv import catalogue
from capacity.planning import TARGET_RANGE
from entitlements.models import Pool, Region, ServedModel
from entitlements.models.prices import Term
from http_plumbing.fields import NumberField
from portal.models import CV_RANGE, Basis, LaunchRequest, LaunchRequestEvent
from portal.quotes import request_quotes
from portal.selectors import Sizing, size_request
from portal.services.intake import EDITABLE_FIELDS


class EventOut(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor.get_username")

    class Meta:
        model = LaunchRequestEvent
        fields = ["at", "actor", "transition", "from_state", "to_state", "comment", "changes"]


class LaunchRequestOut(serializers.ModelSerializer):
    tenant = serializers.CharField(source="tenant.slug")
    created_by = serializers.CharField(source="created_by.get_username")
    model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    proposed_pool: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    regions = serializers.SerializerMethodField()
    scenario_cu = serializers.SerializerMethodField()
    scenario_planning = serializers.SerializerMethodField()
    quotes = serializers.SerializerMethodField()
    events = serializers.SerializerMethodField()

    class Meta:
        model = LaunchRequest
        fields = [
            "uuid",
            "tenant",
            "created_by",
            "state",
            *EDITABLE_FIELDS,
            "regions",
            "scenario_cu",
            "scenario_planning",
            "quotes",
            "submitted_at",
            "decided_at",
            "decision_comment",
            "created_at",
            "updated_at",
            "events",
        ]

    def get_regions(self, obj: LaunchRequest) -> list[dict[str, Any]]:
        return [
            {
                "region": row.region.slug,
                "approved_cu": None if row.approved_cu is None else str(row.approved_cu),
                "entitlement": str(row.entitlement.uuid) if row.entitlement is not None else None,
            }
            for row in obj.region_rows.select_related("region", "entitlement")
        ]

    def _sizing(self, obj: LaunchRequest) -> Sizing | None:
        """One sizing per request for both scenario fields, on a single request's answers only: each
        scenario is a replay (~0.1 s), so a list of 200 rows leaves them null (read the request)."""
        if not self.context.get("with_sizing"):
            return None
        cache: dict[Any, Sizing] = self.__dict__.setdefault("_sized", {})
        if obj.pk not in cache:
            cache[obj.pk] = size_request(obj, [])
        return cache[obj.pk]

    def get_scenario_cu(self, obj: LaunchRequest) -> dict[str, str | None] | None:
        """Per scenario, the CU to buy (the planning answer an approval grants), as a decimal string;
        null in lists."""
        sized = self._sizing(obj)
        return None if sized is None else {k: None if v is None else str(v) for k, v in sized.cu.items()}

    def get_scenario_planning(self, obj: LaunchRequest) -> dict[str, dict[str, Any] | None] | None:
        """Per scenario, the planning answer with its check (docs/contract.md §3: cu_to_buy, target_throttled_share,
        replay, replay_one_step_less, planning_basis); null in lists."""
        sized = self._sizing(obj)
        return None if sized is None else {k: None if a is None else a.to_dict() for k, a in sized.planning.items()}

    def get_quotes(self, obj: LaunchRequest) -> list[dict[str, Any]] | None:
        """docs/contract.md §10: the committed CU per term of the price list (portal.quotes); null in lists."""
        sized = self._sizing(obj)
        return None if sized is None else request_quotes(obj, sized)["quotes"]

    def get_events(self, obj: LaunchRequest) -> list[dict[str, Any]]:
        if not self.context.get("with_events"):
            return []
        return EventOut(obj.events.select_related("actor").order_by("at", "pk"), many=True).data  # type: ignore[return-value]


class LaunchRequestIn(serializers.Serializer):
    """Every field optional: a draft fills in over time; submit says what is still missing."""

    title = serializers.CharField(max_length=160, required=False, allow_blank=True)
    model = serializers.SlugRelatedField(slug_field="slug", queryset=ServedModel.objects.all(), required=False)
    regions = serializers.SlugRelatedField(slug_field="slug", queryset=Region.objects.all(), many=True, required=False)
    proposed_pool = serializers.SlugRelatedField(
        slug_field="slug", queryset=Pool.objects.all(), required=False, allow_null=True
    )
    launch_date = serializers.DateField(required=False, allow_null=True)
    end_date = serializers.DateField(required=False, allow_null=True)
    traffic_class = serializers.ChoiceField(choices=LaunchRequest.TrafficClassChoice.choices, required=False)
    criticality = serializers.ChoiceField(choices=LaunchRequest.Criticality.choices, required=False)
    justification = serializers.CharField(required=False, allow_blank=True)
    streaming = serializers.BooleanField(required=False)
    target_throttled_share = NumberField(
        min_value=TARGET_RANGE[0],
        max_value=TARGET_RANGE[1],
        required=False,
        allow_null=True,
        help_text="share of requests the bucket may throttle at the CU to buy; null: the class default",
    )
    minute_rate_cv = NumberField(
        min_value=CV_RANGE.low,
        max_value=CV_RANGE.high,
        required=False,
        allow_null=True,
        help_text="coefficient of variation of the one-minute rate in the envelope replay; null: the default",
    )
    workload_kind = serializers.ChoiceField(
        choices=sorted(catalogue()),
        required=False,
        help_text="the catalogue's workload kind (data/workload_cv.csv) whose minute-rate CV is the default when "
        "the tenant has recorded none for this model and class; default conversation",
        error_messages={
            "invalid_choice": f"unknown workload kind {{input!r}}: expected one of {', '.join(sorted(catalogue()))}"
        },
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name in EDITABLE_FIELDS:
            if name in fields:
                continue
            if name.endswith("_basis"):
                fields[name] = serializers.ChoiceField(choices=Basis.choices, required=False)
            elif name.endswith("_value"):
                fields[name] = serializers.FloatField(min_value=0, required=False, allow_null=True)
            else:
                fields[name] = serializers.IntegerField(min_value=0, required=False, allow_null=True)
        return fields


class CommentIn(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="")


TERM_HELP = "the commitment term chosen (a row of the request's quotes); default on_demand"


class ApproveIn(CommentIn):
    term = serializers.ChoiceField(choices=Term.choices, required=False, default="on_demand", help_text=TERM_HELP)


class PartialApproveIn(serializers.Serializer):
    regions = serializers.DictField(
        child=serializers.DecimalField(max_digits=14, decimal_places=3, min_value=0),
        help_text="CU to approve per region slug; 0 = none there",
    )
    comment = serializers.CharField(required=False, allow_blank=True, default="")
    term = serializers.ChoiceField(choices=Term.choices, required=False, default="on_demand", help_text=TERM_HELP)
