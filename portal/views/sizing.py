"""The sizing calculator (/sizing/): one request class in, replicas, KV tail, cost and every step out.

The form is translated into the API's JSON (CONTRACT §3) and sized by the same code as
`POST /api/v1/sizing`, so the page and the API cannot disagree. Results follow the inputs as people
type (htmx GET of the `results` partial); errors are shown beside the field they name, via
out-of-band swaps, so the input being typed is never replaced.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from capacity.daycost import HOURS, DayCost
from capacity.diurnal import size_day
from capacity.input_errors import SizingInputError
from capacity.rate_basis import BASES
from capacity.sizing import size
from capacity.sizing_result import SizingResult
from capacity.steps import num
from capacity.traces import TraceParseError
from entitlements.models import Accelerator, OperatingPoint, ServedModel
from entitlements.sizing_specs import PRICING, CostOptions
from portal import access
from portal.charts import sizing as charts_sizing
from sizing.parsing import PreparedSizing, run_sizing, sizing_response
from telemetry.selectors import TraceNotFound, traces_visible_to
from telemetry.trace_import import owner_tenant, trace_import

TEMPLATE = "portal/sizing/calculator.html"
BASIS_LABELS = {"mean": "mean", "p95_1m": "p95 minute", "p99_1m": "p99 minute", "peak_1m": "busiest minute"}
# An interactive service's day: a trough of about a third of the peak before dawn, a climb through
# the morning, the peak early afternoon, a slow evening decline. Multiplies the arrival rate.
DEFAULT_DIURNAL = (
    0.35, 0.30, 0.28, 0.27, 0.28, 0.32, 0.42, 0.55, 0.70, 0.82, 0.90, 0.95,
    0.97, 1.00, 1.00, 0.98, 0.95, 0.90, 0.82, 0.72, 0.62, 0.53, 0.45, 0.40,
)  # fmt: skip
DEFAULT_MODEL = "llama-3.1-8b"
DAY_SIM_REQUESTS = 4_000  # per hour; the day chart needs replica counts, not a fine KV tail
# A chat class on an 8B model, on one-GPU replicas so the day visibly scales (see the demo pool
# llama-3.1-8b-us-east-h100); lengths near that pool's envelope.
DEFAULTS: dict[str, Any] = {
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
QUANTILES = ("mean", "p50", "p95", "p99")
NUMBERS = ("cache_hit_ratio", "cancellation_ratio", "utilization_target", "lb_unevenness", "startup_minutes")
COST_NUMBERS = ("electricity_per_kwh", "pue", "network_per_gb", "slo_met_fraction")


def _num(label: str, *, required: bool = True, step: str = "any", help_text: str = "") -> forms.FloatField:
    return forms.FloatField(
        label=label, required=required, help_text=help_text, widget=forms.NumberInput(attrs={"step": step})
    )


class SizingForm(forms.Form):
    model = forms.ChoiceField()
    accelerator = forms.ChoiceField(required=False)
    arrival_rate_rps = _num(
        "Arrival rate (req/s)", required=False, help_text="with a trace and a planning rate chosen, ignored"
    )
    arrival_rate_basis = forms.ChoiceField(
        label="Planning rate (trace)",
        required=False,
        choices=[("", "the rate above (blank: busiest minute)"), *((b, BASIS_LABELS[b]) for b in BASES)],
        help_text="one-minute windows sliding every second",
    )
    lengths = forms.ChoiceField(
        choices=[("quantiles", "stated quantiles"), ("trace", "a trace")], widget=forms.RadioSelect
    )
    trace = forms.ChoiceField(required=False)
    prompt_mean = _num("mean", required=False)
    prompt_p50 = _num("p50", required=False)
    prompt_p95 = _num("p95", required=False)
    prompt_p99 = _num("p99", required=False)
    output_mean = _num("mean", required=False)
    output_p50 = _num("p50", required=False)
    output_p95 = _num("p95", required=False)
    output_p99 = _num("p99", required=False)
    cache_hit_ratio = _num("Prefix-cache hit ratio")
    cancellation_ratio = _num("Cancelled share")
    ttft_p99_s = _num("TTFT p99 (s)")
    tpot_p99_s = _num("TPOT p99 (s)")
    utilization_target = _num("Utilization target")
    failure_policy = forms.CharField(help_text="none, zone, replica:n or fraction:f")
    zones = forms.IntegerField(widget=forms.NumberInput(attrs={"step": 1}))
    lb_unevenness = _num("LB unevenness", help_text="busiest replica ÷ average")
    startup_minutes = _num("Replica startup (min)")
    ramp_rps_per_minute = _num("Ramp (req/s per min)")
    pricing = forms.ChoiceField(choices=list(PRICING.items()))
    electricity_per_kwh = _num("Electricity (USD/kWh)")
    pue = _num("PUE")
    network_per_gb = _num("Network (USD/GB)")
    slo_met_fraction = _num("SLO-met share", help_text="useful share of output")
    diurnal = forms.CharField(
        label="Hourly multipliers (24, of the arrival rate)", widget=forms.Textarea(attrs={"rows": 3})
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        models = ServedModel.objects.filter(operating_points__isnull=False).distinct().order_by("slug")
        self.fields["model"].choices = [(m.slug, m.name) for m in models]  # type: ignore[attr-defined]
        accs = Accelerator.objects.filter(operating_points__isnull=False).distinct().order_by("slug")
        self.fields["accelerator"].choices = [("", "cheapest feasible point")] + [  # type: ignore[attr-defined]
            (a.slug, a.name) for a in accs
        ]
        # Which accelerators have a measured point for each model: the page hides the others (issue 22).
        self.accelerators_by_model: dict[str, list[str]] = {}
        for model_slug, acc_slug in (
            OperatingPoint.objects.values_list("model__slug", "accelerator__slug")
            .distinct()
            .order_by("accelerator__slug")
        ):
            self.accelerators_by_model.setdefault(model_slug, []).append(acc_slug)
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
        """The API's JSON for these inputs (CONTRACT §3)."""
        d = self.cleaned_data
        body: dict[str, Any] = {
            "model": d["model"],
            "accelerator": d["accelerator"] or None,
            "arrival_rate_rps": d["arrival_rate_rps"],
            "slo": {"ttft_p99_s": d["ttft_p99_s"], "tpot_p99_s": d["tpot_p99_s"]},
            "failure_policy": d["failure_policy"],
            "zones": d["zones"],
            "ramp_rps_per_minute": d["ramp_rps_per_minute"],
            "cost": {"pricing": d["pricing"], **{k: d[k] for k in COST_NUMBERS}},
            **{k: d[k] for k in NUMBERS},
        }
        if d["lengths"] == "trace":
            body["prompt_tokens"] = body["output_tokens"] = {"trace": d["trace"]}
            if d["arrival_rate_basis"]:
                body["arrival_rate_basis"] = d["arrival_rate_basis"]
                body.pop("arrival_rate_rps")
        else:
            for side in ("prompt", "output"):
                body[f"{side}_tokens"] = {q: d[f"{side}_{q}"] for q in QUANTILES}
        return body


def form_field(api_field: str) -> str:
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


def _results(form: SizingForm, user: Any) -> dict[str, Any]:
    """Size the form's class and its day; SizingInputError lands on the field it names."""
    extra: dict[str, list[str]] = {}
    if not form.is_valid():
        return {"sizing": None, "extra_errors": extra}
    try:
        prepared, result = run_sizing(form.payload(), user)
        day_input = (
            replace(prepared.inp, arrival_times_s=None) if prepared.inp.arrival_times_s is not None else prepared.inp
        )
        day, _ = size_day(day_input, hourly_multipliers=form.cleaned_data["diurnal"], sim_requests=DAY_SIM_REQUESTS)
    except SizingInputError as e:
        _add_error(form, extra, e.field, e.message)
        return {"sizing": None, "extra_errors": extra}
    except TraceNotFound as e:
        _add_error(form, extra, e.field, e.message)
        return {"sizing": None, "extra_errors": extra}
    body = sizing_response(prepared, result)
    kv = result.kv
    steps = [*result.steps, *(replace(s, name=f"day: {s.name}") for s in day.steps)]
    return {
        "sizing": body,
        "fmt": _formatted(result, day, prepared.inp.arrival_rate_rps),
        "steps": [{"name": s.name, "value": num(s.value), "unit": s.unit, "formula": s.formula} for s in steps],
        "result": result,
        "day": day.to_dict(),
        "day_cost": day,
        "currency": result.cost.per_hour.currency,
        "kv_chart": charts_sizing.kv_distribution_figure(
            edges=[float(x) for x in kv.hist_edges],
            time_fraction=[float(x) for x in kv.hist_time_fraction],
            p99=kv.kv_tokens_p99,
            capacity_per_replica=result.kv_capacity_tokens_per_replica,
        ),
        "day_chart": charts_sizing.day_cost_figure(
            day.to_dict()["rows"],  # type: ignore[arg-type]  # a list of row dicts
            currency=day.cost_per_day.currency,
        ),
        "extra_errors": extra,
        **_basis_charts(prepared, result, user),
    }


def _basis_charts(prepared: PreparedSizing, result: SizingResult, user: Any) -> dict[str, Any]:
    """With a trace: its one-minute rate distribution with the basis marked, and what sizing for each
    basis would cost per hour, side by side (one sizing per basis, same inputs otherwise)."""
    rates = prepared.minute_rates
    if rates is None:
        return {}
    currency = result.cost.per_hour.currency
    costs: dict[str, float] = {}
    for basis in BASES:
        if basis == prepared.basis:
            costs[basis] = result.cost.per_hour.value
            continue
        try:
            costs[basis] = size(replace(prepared.inp, arrival_rate_rps=rates.rate(basis))).cost.per_hour.value
        except SizingInputError:
            continue
    used = prepared.basis if prepared.basis in BASES else "explicit"
    shown = dict(rates.rates)
    if used == "explicit":
        shown["explicit"] = prepared.inp.arrival_rate_rps
        costs["explicit"] = result.cost.per_hour.value
    return {
        "basis_costs": [(b, num(c)) for b, c in costs.items()],
        "rate_chart": charts_sizing.minute_rate_figure(
            window_rates=[float(x) for x in rates.window_rates], rates=shown, used=used
        ),
        "basis_cost_chart": charts_sizing.basis_cost_figure(costs=costs, used=used, currency=currency),
    }


def _formatted(result: SizingResult, day: DayCost, rate: float) -> dict[str, str]:
    """Headline numbers as the step formulas write them (capacity.steps.num), so they match."""
    op = result.operating_point_used

    def opt(x: float | None) -> str:
        return "none" if x is None else f"{num(x)} s"

    return {
        "capacity_units": num(result.capacity_units),
        "mean_concurrency": num(result.mean_concurrency),
        "kv_tokens_p99": num(result.kv_tokens_p99),
        "kv_gb_p99": num(result.kv_bytes_p99 / 1e9),
        "kv_capacity": num(result.kv_capacity_tokens_per_replica),
        "sim_requests": f"{result.kv.requests:,}",
        "per_hour": num(result.cost.per_hour.value),
        "per_million": num(result.cost.per_million_useful_output_tokens.value),
        "marginal": num(result.cost.marginal_per_million_output_tokens.value),
        "out_tps": num(op.out_tps_per_replica),
        "ttft": num(result.ttft_s),
        "tpot": num(result.tpot_s),
        "ttft_limit": opt(op.ttft_limit_s),
        "tpot_limit": opt(op.tpot_limit_s),
        "ref_prompt": num(op.ref_mix.mean_prompt),
        "ref_output": num(op.ref_mix.mean_output),
        "rate": num(rate),
        "day_cost": num(day.cost_per_day.value),
        "day_per_million": num(day.per_million_useful_output_tokens.value),
    }


def _add_error(form: SizingForm, extra: dict[str, list[str]], field: str, message: str) -> None:
    name = form_field(field)
    if name == "slo":
        extra["slo"] = [message]
    elif name == "__all__":
        form.add_error(None, f"{field}: {message}")
    else:
        form.add_error(name, message)


def _defaults() -> dict[str, Any]:
    """DEFAULTS on the default model when the catalogue has it; otherwise the first model with a
    latency-bounded point, with that point's limits as the SLO so the first view sizes something.
    The cost fields start where the API's do when a request leaves `cost` out: `CostOptions()`."""
    cost = CostOptions()
    defaults = {**DEFAULTS, **{k: getattr(cost, k) for k in ("pricing", *COST_NUMBERS)}}
    if OperatingPoint.objects.filter(model__slug=DEFAULT_MODEL, accelerator__slug=defaults["accelerator"]).exists():
        return {**defaults, "model": DEFAULT_MODEL}
    op = (
        OperatingPoint.objects.filter(
            is_ceiling=False, ttft_p99_limit_ms__isnull=False, tpot_p99_limit_ms__isnull=False
        )
        .select_related("model")
        .order_by("model__slug", "pk")
        .first()
    )
    if op is None:
        return {**defaults, "accelerator": ""}
    return {
        **defaults,
        "model": op.model.slug,
        "accelerator": "",
        "ttft_p99_s": f"{op.ttft_p99_limit_ms / 1000:g}",  # type: ignore[operator]  # a measured point has both
        "tpot_p99_s": f"{op.tpot_p99_limit_ms / 1000:g}",  # type: ignore[operator]
    }


@login_required
def calculator(request: HttpRequest) -> HttpResponse:
    access.require_person(request, hide=True)
    # Missing keys take the defaults, so a link with a few parameters still sizes; a field sent
    # empty stays empty (and says so).
    form = SizingForm({**_defaults(), **request.GET.dict()}, user=request.user)
    ctx = _results(form, request.user)
    slots = [(name, [str(e) for e in form.errors.get(name, [])]) for name in form.fields]
    slots.append(("slo", ctx["extra_errors"].get("slo", [])))
    ctx.update(form=form, error_slots=slots, slo_errors=ctx["extra_errors"].get("slo", []), pricing=PRICING)
    if getattr(request, "htmx", False):
        return render(request, f"{TEMPLATE}#results", {**ctx, "oob": True})
    return render(request, TEMPLATE, ctx)


@require_POST
@login_required
def trace_upload(request: HttpRequest) -> HttpResponse:
    """A trace uploaded from the calculator (issue 22): stored for the uploader's tenant (platform-wide
    for staff), then the calculator opens in trace mode on it. A bad file names what is wrong; nothing
    is stored."""
    access.require_person(request, hide=True)
    upload = request.FILES.get("file")
    name = (request.POST.get("name") or "").strip()
    error = ""
    if upload is None:
        error = "file: choose a CSV trace to upload"
    elif not name:
        error = "name: give the trace a name"
    elif upload.size > settings.TRACE_MAX_BYTES:  # type: ignore[operator]  # an uploaded file has a size
        error = f"file: at most {settings.TRACE_MAX_BYTES:,} bytes"
    if not error:
        try:
            trace = trace_import(
                data=upload.chunks(),  # type: ignore[union-attr]  # no upload set an error above; parsed as read
                name=name[:200],
                tenant=owner_tenant(request.user),
                uploaded_by=request.user,
            )
        except TraceParseError as exc:
            error = f"file: {exc}"
        else:
            return redirect(f"{reverse('sizing')}?lengths=trace&trace={trace.pk}")
    form = SizingForm(_defaults(), user=request.user)
    ctx = _results(form, request.user)
    slots = [(n, [str(e) for e in form.errors.get(n, [])]) for n in form.fields]
    ctx.update(form=form, error_slots=slots, slo_errors=[], pricing=PRICING, upload_error=error)
    return render(request, TEMPLATE, ctx, status=400)
