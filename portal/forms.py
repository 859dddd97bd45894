"""Forms of the launch intake pages, the approver queue's filter, and the sizing calculator's form.

The request form is a plain Form, not a ModelForm: autosave keeps every field that validated
even when a neighbour did not, so the model is written field by field through the service.
"""

from __future__ import annotations

from typing import Any, cast

import django_filters
from django import forms
from django.conf import settings
from django.core.validators import MaxValueValidator

from capacity.daycost import HOURS
from capacity.envelope import ENVELOPE_LENGTHS, ENVELOPE_ORDER
from capacity.minute_cv import catalogue, catalogue_cv
from capacity.ordering import ordering_errors, spaced
from capacity.planning import TARGET_RANGE
from capacity.rate_basis import BASES
from entitlements.models import Pool, Region, ServedModel, Tenant
from entitlements.sizing_specs import PRICING, CostOptions
from portal import sizing_selectors
from portal.models import CV_RANGE, SCENARIO_MAX, SCENARIOS, Basis, LaunchRequest, State
from sizing.parsing import COST_FIELDS, NUMBERS, QUANTILES
from telemetry.selectors import traces_visible_to

SECTIONS = (
    ("Basics", ("title", "model", "traffic_class", "criticality")),
    ("Regions and window", ("regions", "launch_date", "end_date")),
    (
        "Workload envelope",
        (*ENVELOPE_LENGTHS, "max_concurrency", "ttft_p99_ms", "tpot_p99_ms", "streaming"),
    ),
    (
        "Scenarios (peak, per region)",
        (
            *(f"{s}_{k}" for s in SCENARIOS for k in ("value", "basis")),
            "target_throttled_share",
            "minute_rate_cv",
            "workload_kind",
        ),
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
CV_ERROR = (
    f"minute-rate CV: a coefficient of variation from {CV_RANGE.low:g} to {CV_RANGE.high:g} "
    f"(0: a steady Poisson stream; the default is {catalogue_cv().minute_rate_cv:g})"
)
CV_HELP = (
    "how far each minute's request rate swings around the scenario's in the replay (coefficient of variation; "
    f"0 = steady); empty: what your tenant sent for this model and class over the last 28 days, else the default "
    f"of the workload kind below (conversation {catalogue_cv().minute_rate_cv:g})"
)
KINDS = ", ".join(sorted(catalogue()))


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
    minute_rate_cv = forms.FloatField(
        label="Minute-rate CV",
        min_value=CV_RANGE.low,
        max_value=CV_RANGE.high,
        required=False,
        help_text=CV_HELP,
        error_messages={"min_value": CV_ERROR, "max_value": CV_ERROR, "invalid": CV_ERROR},
        widget=forms.NumberInput(attrs={"step": "any", "placeholder": "default"}),
    )
    # The catalogue kind whose CV is the default (docs/contract.md §3), as the calculator's; one per request.
    workload_kind = forms.ChoiceField(
        label="Workload kind",
        choices=[(k, f"{k}: minute-rate CV {v.minute_rate_cv:g}") for k, v in catalogue().items()],
        required=False,
        help_text="sets the minute-rate CV when none is typed and your tenant has sent none for this model and class",
        error_messages={"invalid_choice": f"unknown workload kind %(value)s: expected one of {KINDS}"},
    )
    justification = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}), required=False)
    # Set by the availability rows' "file against" buttons (static/js/intake.js), not typed.
    proposed_pool = forms.ModelChoiceField(
        queryset=Pool.objects.all(), required=False, to_field_name="slug", widget=forms.HiddenInput
    )

    @classmethod
    def initial_from(cls, req: LaunchRequest) -> dict[str, Any]:
        data = {
            name: getattr(req, name) for name in cls.base_fields if name not in ("regions", "model", "proposed_pool")
        }
        data["model"] = req.model.slug if req.model is not None else None
        data["proposed_pool"] = req.proposed_pool.slug if req.proposed_pool is not None else None
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
        if self.data.get("proposed_pool") is None:  # a post without the hidden field keeps the saved pool
            changes.pop("proposed_pool", None)
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


# The sizing calculator (/sizing/): its form sends the sizing API's JSON (docs/contract.md §3), so the page and
# `POST /api/v1/sizing` are sized by the same parser (sizing.parsing).

SIZING_BASIS_LABELS = {"mean": "mean", "p95_1m": "p95 minute", "p99_1m": "p99 minute", "peak_1m": "busiest minute"}
# An interactive service's day: a trough of about a third of the peak before dawn, a climb through
# the morning, the peak early afternoon, a slow evening decline. Multiplies the arrival rate.
DEFAULT_DIURNAL = (
    0.35, 0.30, 0.28, 0.27, 0.28, 0.32, 0.42, 0.55, 0.70, 0.82, 0.90, 0.95,
    0.97, 1.00, 1.00, 0.98, 0.95, 0.90, 0.82, 0.72, 0.62, 0.53, 0.45, 0.40,
)  # fmt: skip
DEFAULT_SIZING_MODEL = "llama-3.1-8b"
# A chat class on an 8B model, on one-GPU replicas so the day visibly scales (see the demo pool
# llama-3.1-8b-us-east-h100); lengths near that pool's envelope.
SIZING_DEFAULTS: dict[str, Any] = {
    "accelerator": "h100-80gb",
    "lengths": "quantiles",
    "arrival_rate_rps": 100,
    "prompt_mean": 1000,
    "prompt_p50": 800,
    "prompt_p95": 4000,
    "prompt_p99": 8000,
    "output_mean": 120,
    "output_p50": 70,
    "output_p95": 400,
    "output_p99": 800,
    "cache_hit_ratio": 0,
    "cancellation_ratio": 0,
    "ttft_p99_s": 2,
    "tpot_p99_s": 0.1,
    "utilization_target": 0.7,
    "failure_policy": "zone",
    "zones": 3,
    "lb_unevenness": 1.0,
    "startup_minutes": 10,
    "ramp_rps_per_minute": 0,
    "diurnal": ", ".join(f"{x:g}" for x in DEFAULT_DIURNAL),
}


def _sizing_number(label: str, *, required: bool = True, step: str = "any", help_text: str = "") -> forms.FloatField:
    return forms.FloatField(
        label=label, required=required, help_text=help_text, widget=forms.NumberInput(attrs={"step": step})
    )


class SizingForm(forms.Form):
    model = forms.ChoiceField()
    accelerator = forms.ChoiceField(required=False)
    arrival_rate_rps = _sizing_number(
        "Arrival rate (req/s)", required=False, help_text="with a trace and a planning rate chosen, ignored"
    )
    arrival_rate_basis = forms.ChoiceField(
        label="Planning rate (trace)",
        required=False,
        choices=[("", "the rate above (blank: busiest minute)"), *((b, SIZING_BASIS_LABELS[b]) for b in BASES)],
        help_text="one-minute windows sliding every second",
    )
    # The minute-rate CV of a stated envelope (issue 45.3): the catalogue's for the kind chosen, shown
    # beside the answer with its source (data/workload_cv.csv); a trace keeps its own timing.
    workload_kind = forms.ChoiceField(
        label="Workload kind",
        required=False,
        choices=[("", f"default ({catalogue_cv().kind})")]
        + [(k, f"{k}: minute-rate CV {v.minute_rate_cv:g}") for k, v in catalogue().items()],
        help_text="sets how much the per-minute rate varies (stated quantiles only)",
    )
    lengths = forms.ChoiceField(
        choices=[("quantiles", "stated quantiles"), ("trace", "a trace")], widget=forms.RadioSelect
    )
    trace = forms.ChoiceField(required=False)
    prompt_mean = _sizing_number("mean", required=False)
    prompt_p50 = _sizing_number("p50", required=False)
    prompt_p95 = _sizing_number("p95", required=False)
    prompt_p99 = _sizing_number("p99", required=False)
    output_mean = _sizing_number("mean", required=False)
    output_p50 = _sizing_number("p50", required=False)
    output_p95 = _sizing_number("p95", required=False)
    output_p99 = _sizing_number("p99", required=False)
    cache_hit_ratio = _sizing_number("Prefix-cache hit ratio")
    cancellation_ratio = _sizing_number("Cancelled share")
    ttft_p99_s = _sizing_number("TTFT p99 (s)")
    tpot_p99_s = _sizing_number("TPOT p99 (s)")
    utilization_target = _sizing_number("Utilization target")
    failure_policy = forms.CharField(help_text="none, zone, replica:n or fraction:f")
    zones = forms.IntegerField(widget=forms.NumberInput(attrs={"step": 1}))
    lb_unevenness = _sizing_number("LB unevenness", help_text="busiest replica ÷ average")
    startup_minutes = _sizing_number("Replica startup (min)")
    ramp_rps_per_minute = _sizing_number("Ramp (req/s per min)")
    pricing = forms.ChoiceField(choices=list(PRICING.items()))
    electricity_per_kwh = _sizing_number("Electricity (USD/kWh)")
    pue = _sizing_number("PUE")
    network_per_gb = _sizing_number("Network (USD/GB)")
    slo_met_fraction = _sizing_number("SLO-met share", help_text="useful share of output")
    diurnal = forms.CharField(
        label="Hourly multipliers (24, of the arrival rate)", widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["model"].choices = sizing_selectors.sizable_models()  # type: ignore[attr-defined]
        self.fields["accelerator"].choices = [  # type: ignore[attr-defined]
            ("", "cheapest feasible point"),
            *sizing_selectors.sizable_accelerators(),
        ]
        # Which accelerators have a measured point for each model: the page hides the others (issue 22).
        self.accelerators_by_model = sizing_selectors.accelerators_by_model()
        # The page's own help and error ids (portal/sizing/_field.html; the errors are swapped in by id):
        # Django would point aria-describedby at an error list this page never draws.
        for name, f in self.fields.items():
            if name != "lengths":  # a radio group: its fieldset carries the description
                help_id = [f"id_{name}_helptext"] if f.help_text else []
                f.widget.attrs.setdefault("aria-describedby", " ".join([*help_id, f"err-{name}"]))
        self.traces = list(traces_visible_to(user))
        self.fields["trace"].choices = [("", "—")] + [  # type: ignore[attr-defined]
            (str(t.pk), f"{t.name} ({t.requests:,} requests{'' if t.tenant_id else ', platform'})") for t in self.traces
        ]

    def clean_diurnal(self) -> list[float]:
        parts = [p for p in self.cleaned_data["diurnal"].replace("\n", ",").split(",") if p.strip()]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise forms.ValidationError("numbers separated by commas, e.g. 0.3, 0.3, … 1.0")
        if len(values) != HOURS:
            raise forms.ValidationError(f"needs {HOURS} multipliers, got {len(values)}")
        return values

    def payload(self) -> dict[str, Any]:
        """The API's JSON for these inputs (docs/contract.md §3): the API's own field names, those the form has."""
        d = self.cleaned_data
        body: dict[str, Any] = {
            "model": d["model"],
            "accelerator": d["accelerator"] or None,
            "arrival_rate_rps": d["arrival_rate_rps"],
            "slo": {"ttft_p99_s": d["ttft_p99_s"], "tpot_p99_s": d["tpot_p99_s"]},
            "failure_policy": d["failure_policy"],
            "zones": d["zones"],
            "cost": {k: d[k] for k in COST_FIELDS if k in self.base_fields},
            **{k: d[k] for k in NUMBERS if k in self.base_fields},
        }
        if d["lengths"] == "trace":
            body["prompt_tokens"] = body["output_tokens"] = {"trace": d["trace"]}
            if d["arrival_rate_basis"]:
                body["arrival_rate_basis"] = d["arrival_rate_basis"]
                body.pop("arrival_rate_rps")
        else:
            for side in ("prompt", "output"):
                body[f"{side}_tokens"] = {q: d[f"{side}_{q}"] for q in QUANTILES}
            if d.get("workload_kind"):
                body["workload_kind"] = d["workload_kind"]
        return body

    def add_api_error(self, field: str, message: str, slo_errors: list[str]) -> None:
        """An error the sizing API names by its field, beside the form field it means; the SLO's own
        errors (no single field) go to `slo_errors`, anything unplaceable to the whole form."""
        name = sizing_form_field(field)
        if name == "slo":
            slo_errors[:] = [message]
        elif name == "__all__":
            self.add_error(None, f"{field}: {message}")
        else:
            self.add_error(name, message)


def sizing_form_field(api_field: str) -> str:
    """The form field an API error names (e.g. `prompt_tokens.p50` → `prompt_p50`); `slo` stays `slo`."""
    head, _, rest = api_field.partition(".")
    if head in ("prompt_tokens", "output_tokens"):
        name = "trace" if rest.startswith(("trace", "samples")) else f"{head.removesuffix('_tokens')}_{rest}"
    elif head in ("slo", "cost") and rest:
        name = rest
    elif head in ("model", "operating_points"):
        name = "model"
    elif head.startswith(("hourly", "arrival_times_s")):
        name = "diurnal" if head.startswith("hourly") else "trace"
    elif head.startswith("accelerators["):
        name = "pricing"
    elif head == "cost_inputs":
        name = rest
    else:
        name = head
    return name if name in SizingForm.base_fields or name == "slo" else "__all__"


def sizing_defaults() -> dict[str, Any]:
    """SIZING_DEFAULTS on the default model when the catalogue has it; otherwise the first model with a
    latency-bounded point, with that point's limits as the SLO so the first view sizes something.
    The cost fields start where the API's do when a request leaves `cost` out: `CostOptions()`."""
    cost = CostOptions()
    defaults = {**SIZING_DEFAULTS, **{k: getattr(cost, k) for k in COST_FIELDS if k in SizingForm.base_fields}}
    if sizing_selectors.has_operating_point(model=DEFAULT_SIZING_MODEL, accelerator=defaults["accelerator"]):
        return {**defaults, "model": DEFAULT_SIZING_MODEL}
    op = sizing_selectors.first_latency_bounded_point()
    if op is None:
        return {**defaults, "accelerator": ""}
    return {
        **defaults,
        "model": op.model.slug,
        "accelerator": "",
        "ttft_p99_s": f"{op.ttft_p99_limit_ms / 1000:g}",  # type: ignore[operator]  # a measured point has both
        "tpot_p99_s": f"{op.tpot_p99_limit_ms / 1000:g}",  # type: ignore[operator]
    }
