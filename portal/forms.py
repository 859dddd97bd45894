"""Forms of the launch intake pages, and the approver queue's filter.

The request form is a plain Form, not a ModelForm: autosave keeps every field that validated
even when a neighbour did not, so the model is written field by field through the service.
"""

from __future__ import annotations

from typing import Any, cast

import django_filters
from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator

from capacity.envelope import ENVELOPE_ORDER
from capacity.ordering import ordering_errors, spaced
from capacity.planning import TARGET_RANGE
from entitlements.models import Region, ServedModel, Tenant
from portal.models import SCENARIO_MAX, SCENARIOS, Basis, LaunchRequest, State

SECTIONS = (
    ("Basics", ("title", "model", "traffic_class", "criticality")),
    ("Regions and window", ("regions", "launch_date", "end_date")),
    (
        "Workload envelope",
        (
            "prompt_p50",
            "prompt_p95",
            "max_prompt_tokens",
            "output_p50",
            "output_p95",
            "max_output_tokens",
            "max_concurrency",
            "ttft_p99_ms",
            "tpot_p99_ms",
            "streaming",
        ),
    ),
    (
        "Scenarios (peak, per region)",
        (*(f"{s}_{k}" for s in SCENARIOS for k in ("value", "basis")), "target_throttled_share"),
    ),
    ("Justification", ("justification",)),
)


TARGET_ERROR = (
    f"target throttled share: a share of requests from {TARGET_RANGE[0]:g} to {TARGET_RANGE[1]:g} "
    "(0.001: one request in a thousand throttled)"
)
TARGET_HELP = (
    "the share of requests the token bucket may throttle at the CU to buy (0.001 = 0.1 %); empty: the class "
    "default ("
    + ", ".join(f"{k.replace('_', ' ')} {v:g}" for k, v in settings.PLANNING_TARGET_THROTTLED_SHARE.items())
    + ")"
)


def _max_of(name: str) -> Any:
    """The model field's upper bound (portal.models ranges), so the form refuses what the model would."""
    return next(
        v.limit_value for v in LaunchRequest._meta.get_field(name).validators if isinstance(v, MaxValueValidator)
    )


def _count(name: str, label: str, help_text: str = "") -> forms.IntegerField:
    return forms.IntegerField(label=label, min_value=0, max_value=_max_of(name), required=False, help_text=help_text)


def _scenario(name: str, label: str) -> forms.FloatField:
    return forms.FloatField(label=label, min_value=0, max_value=_max_of(name), required=False)


class LaunchRequestForm(forms.Form):
    title = forms.CharField(
        max_length=160, required=False, widget=forms.TextInput(attrs={"placeholder": "Untitled launch"})
    )
    model = forms.ModelChoiceField(
        queryset=ServedModel.objects.filter(pools__isnull=False).distinct(), required=False, to_field_name="slug"
    )
    traffic_class = forms.ChoiceField(choices=LaunchRequest.TrafficClassChoice.choices, required=False)
    criticality = forms.ChoiceField(choices=LaunchRequest.Criticality.choices, required=False)
    regions = forms.ModelMultipleChoiceField(
        queryset=Region.objects.all(), required=False, to_field_name="slug", widget=forms.CheckboxSelectMultiple
    )
    launch_date = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    end_date = forms.DateField(
        required=False, widget=forms.DateInput(attrs={"type": "date"}), help_text="empty: open-ended"
    )
    prompt_p50 = _count("prompt_p50", "Prompt tokens p50")
    prompt_p95 = _count("prompt_p95", "Prompt tokens p95")
    max_prompt_tokens = _count("max_prompt_tokens", "Max prompt tokens")
    output_p50 = _count("output_p50", "Output tokens p50")
    output_p95 = _count("output_p95", "Output tokens p95")
    max_output_tokens = _count("max_output_tokens", "Max output tokens")
    max_concurrency = _count("max_concurrency", "Max concurrency", "requests in flight at once")
    ttft_p99_ms = _count("ttft_p99_ms", "TTFT p99 (ms)")
    tpot_p99_ms = _count("tpot_p99_ms", "TPOT p99 (ms)")
    streaming = forms.BooleanField(required=False)
    committed_value = _scenario("committed_value", "Committed")
    committed_basis = forms.ChoiceField(label="unit", choices=Basis.choices, required=False)
    expected_value = _scenario("expected_value", "Expected")
    expected_basis = forms.ChoiceField(label="unit", choices=Basis.choices, required=False)
    upside_value = _scenario("upside_value", "Upside")
    upside_basis = forms.ChoiceField(label="unit", choices=Basis.choices, required=False)
    stress_value = _scenario("stress_value", "Stress")
    stress_basis = forms.ChoiceField(label="unit", choices=Basis.choices, required=False)
    target_throttled_share = forms.FloatField(
        label="Target throttled share",
        min_value=TARGET_RANGE[0],
        max_value=TARGET_RANGE[1],
        required=False,
        help_text=TARGET_HELP,
        error_messages={"min_value": TARGET_ERROR, "max_value": TARGET_ERROR, "invalid": TARGET_ERROR},
        widget=forms.NumberInput(attrs={"step": "any", "placeholder": "class default"}),
    )
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)

    @classmethod
    def initial_from(cls, req: LaunchRequest) -> dict[str, Any]:
        data = {name: getattr(req, name) for name in cls.base_fields if name not in ("regions", "model")}
        data["model"] = req.model.slug if req.model is not None else None
        data["regions"] = list(req.region_rows.values_list("region__slug", flat=True))
        return data

    def clean(self) -> dict[str, Any]:
        data = cast(dict[str, Any], super().clean())  # Form.clean returns cleaned_data, never None
        # Cross-field checks name the later field; the earlier one stays saved.
        start, end = data.get("launch_date"), data.get("end_date")
        if start and end and end <= start:
            self.add_error("end_date", "must be after the launch date")
        for s in SCENARIOS:
            value, limit = data.get(f"{s}_value"), SCENARIO_MAX.get(data.get(f"{s}_basis") or "")
            if value is not None and limit is not None and value > limit:
                self.add_error(f"{s}_value", f"at most {limit:,.0f} {Basis(data[f'{s}_basis']).label}")
        # p50 ≤ p95 here; against the max at submission (portal.services.intake), once both are in.
        percentiles = [(low, high) for low, high in ENVELOPE_ORDER if not high.startswith("max_")]
        for name, message in ordering_errors(data, percentiles, blame="higher", label=spaced).items():
            self.add_error(name, message)
        return data

    def valid_changes(self) -> dict[str, Any]:
        """Fields that validated, for autosave; choice fields left blank keep the saved value."""
        self.is_valid()
        changes = {}
        for name in self.fields:
            if name in self.errors or name not in self.cleaned_data:
                continue
            value = self.cleaned_data[name]
            if value == "" and isinstance(self.fields[name], forms.ChoiceField):
                continue
            changes[name] = list(value) if name == "regions" else value
        if self.data.get("title") is None:
            changes.pop("title", None)
        if self.data.get("justification") is None:
            changes.pop("justification", None)
        return changes

    def sections(self) -> list[tuple[str, list[forms.BoundField]]]:
        return [(title, [self[n] for n in names]) for title, names in SECTIONS]


class CommentForm(forms.Form):
    comment = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)


class LaunchRequestFilter(django_filters.FilterSet):
    """The approver queue: by status, model, region, tenant and launch date."""

    state = django_filters.ChoiceFilter(choices=State.choices, label="Status")
    # Only models some pool serves: a request for any other could never be granted.
    model = django_filters.ModelChoiceFilter(
        queryset=ServedModel.objects.filter(pools__isnull=False).distinct().order_by("slug"),
        field_name="model",
        to_field_name="slug",
        label="Model",
    )
    region = django_filters.ModelChoiceFilter(
        queryset=Region.objects.order_by("slug"),
        field_name="region_rows__region",
        to_field_name="slug",
        distinct=True,
        label="Region",
    )
    tenant = django_filters.ModelChoiceFilter(
        queryset=Tenant.objects.order_by("slug"), to_field_name="slug", label="Tenant"
    )
    launch_after = django_filters.DateFilter(
        field_name="launch_date",
        lookup_expr="gte",
        widget=forms.DateInput(attrs={"type": "date"}),
        label="Launch from",
    )
    launch_before = django_filters.DateFilter(
        field_name="launch_date",
        lookup_expr="lte",
        widget=forms.DateInput(attrs={"type": "date"}),
        label="Launch until",
    )

    class Meta:
        model = LaunchRequest
        fields = ["state", "model", "region", "tenant", "launch_after", "launch_before"]
