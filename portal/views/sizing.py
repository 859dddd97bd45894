"""The sizing calculator (/sizing/): one request class in, replicas, KV tail, cost and every step out.

The form (portal.forms.SizingForm) is translated into the API's JSON (docs/contract.md §3) and sized by the same
code as `POST /api/v1/sizing` (sizing.calculator), so the page and the API cannot disagree. Results follow
the inputs as people type (htmx GET of the `results` partial); errors are shown beside the field they
name, via out-of-band swaps, so the input being typed is never replaced.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from capacity.input_errors import SizingInputError
from capacity.rate_basis import BASES
from capacity.traces import TraceParseError
from entitlements.sizing_specs import PRICING
from portal import access
from portal.charts import sizing as charts_sizing
from portal.forms import SizingForm, sizing_defaults
from portal.numbers import num_pairs, sizing_figures, step_rows
from portal.quotes import quotes_in_words
from sizing.calculator import CalculatorSizing, calculator_sizing
from sizing.parsing import sizing_response
from sizing.quotes import sizing_quotes
from telemetry.selectors import TraceNotFound
from telemetry.trace_import import owner_tenant, trace_import

TEMPLATE = "portal/sizing/calculator.html"


def _results(form: SizingForm, user: Any) -> dict[str, Any]:
    """Size the form's class and its day; an input error lands on the field it names."""
    slo_errors: list[str] = []
    if not form.is_valid():
        return {"sizing": None, "extra_errors": {}}
    try:
        calc = calculator_sizing(form.payload(), user, hourly_multipliers=form.cleaned_data["diurnal"])
    except (SizingInputError, TraceNotFound) as e:
        form.add_api_error(e.field, e.message, slo_errors)
        return {"sizing": None, "extra_errors": {"slo": slo_errors} if slo_errors else {}}
    result, day = calc.result, calc.day
    kv = result.kv
    body = sizing_response(calc.prepared, result)
    return {
        "sizing": body,
        # docs/contract.md §10: the API's own quotes of the answer (sizing.quotes), in words
        "quotes": quotes_in_words(sizing_quotes(form.payload(), body, calc.prepared)),
        "fmt": sizing_figures(result, day, calc.prepared.inp.arrival_rate_rps),
        "steps": step_rows([*result.steps, *(replace(s, name=f"day: {s.name}") for s in day.steps)]),
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
        "extra_errors": {},
        **_basis_charts(calc),
    }


def _basis_charts(calc: CalculatorSizing) -> dict[str, Any]:
    """With a trace: its one-minute rate distribution with the basis marked, and what sizing for each
    basis would cost per hour, side by side."""
    prepared, rates = calc.prepared, calc.prepared.minute_rates
    if rates is None:
        return {}
    used = prepared.basis if prepared.basis in BASES else "explicit"
    shown = dict(rates.rates)
    if used == "explicit":
        shown["explicit"] = prepared.inp.arrival_rate_rps
    return {
        "basis_costs": num_pairs(calc.basis_costs),
        "rate_chart": charts_sizing.minute_rate_figure(
            window_rates=[float(x) for x in rates.window_rates], rates=shown, used=used
        ),
        "basis_cost_chart": charts_sizing.basis_cost_figure(
            costs=calc.basis_costs, used=used, currency=calc.result.cost.per_hour.currency
        ),
    }


@login_required
def calculator(request: HttpRequest) -> HttpResponse:
    access.require_person(request, hide=True)
    # Missing keys take the defaults, so a link with a few parameters still sizes; a field sent
    # empty stays empty (and says so).
    form = SizingForm({**sizing_defaults(), **request.GET.dict()}, user=request.user)
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
    form = SizingForm(sizing_defaults(), user=request.user)
    ctx = _results(form, request.user)
    slots = [(n, [str(e) for e in form.errors.get(n, [])]) for n in form.fields]
    ctx.update(form=form, error_slots=slots, slo_errors=[], pricing=PRICING, upload_error=error)
    return render(request, TEMPLATE, ctx, status=400)
