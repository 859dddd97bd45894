"""The evidence statement page and its CSV (issue 17.1): one entitlement, one period.

The figures come from telemetry.statement (the same dict the API returns). Anyone who may not read the
statement gets 404, never 403; a bad period is a 400 naming the field.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from entitlements.reasons import REASONS
from portal.charts.live import SOURCES
from portal.csv_echo import csv_echo_writer
from telemetry.periods import PeriodError
from telemetry.statement import statement, statement_entitlement
from telemetry.statement_period import period_from_query


def _load(request: HttpRequest, uuid: Any) -> tuple[Any, dict[str, Any]]:
    """The entitlement (404 unless the user may read its statement) and its statement; a bad period
    raises PeriodError (telemetry.statement_period) naming the field."""
    ent = statement_entitlement(request.user, uuid)
    if ent is None:
        raise Http404
    start, end = period_from_query(request.GET)
    return ent, statement(ent, start, end)


def _bad(field: str, message: str) -> HttpResponse:
    return HttpResponse(f"{field}: {message}", status=400, content_type="text/plain; charset=utf-8")


def rows(s: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """The statement flattened to (dotted figure, value), in the statement's own order."""
    out: list[tuple[str, Any]] = []
    for k, v in s.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out += rows(v, f"{name}.")
        elif isinstance(v, list):
            for i, item in enumerate(v):
                out += rows(item, f"{name}.{i}.") if isinstance(item, dict) else [(f"{name}.{i}", item)]
        else:
            out.append((name, v))
    return out


@login_required
def page(request: HttpRequest, uuid: Any) -> HttpResponse:
    try:
        ent, s = _load(request, uuid)
    except PeriodError as exc:
        return _bad(exc.field, exc.message)
    throttles = [
        {"code": code, "n": n, "responsible": REASONS[code].responsible if code in REASONS else ""}
        for code, n in s["requests"]["throttled"]["by_reason"].items()
    ]
    ctx = {
        "ent": ent,
        "s": s,
        "throttles": throttles,
        "start_date": s["period"]["start"][:10],
        "end_date": s["period"]["end"][:10],
        "query": request.GET.urlencode(),
        # period budgets (issue 23): the statement's budget block, one row per period that has one
        "budget_rows": [(k, (s.get("budget") or {}).get(k)) for k in ("daily", "monthly")],
        # borrowed and spilled traffic (issue 36), labelled as the live pages label them
        "source_rows": [(k, label, s["sources"][k]) for k, (label, _) in SOURCES.items()],
    }
    return render(request, "portal/statement.html", ctx)


@login_required
def export(request: HttpRequest, uuid: Any) -> HttpResponse:
    """One row per figure (`figure,value`), the same figures as the page and the API."""
    try:
        ent, s = _load(request, uuid)
    except PeriodError as exc:
        return _bad(exc.field, exc.message)
    w = csv_echo_writer()
    body = w.writerow(["figure", "value"]) + "".join(w.writerow(["" if v is None else v for v in r]) for r in rows(s))
    resp = HttpResponse(body, content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = f'attachment; filename="statement-{ent.uuid}-{s["period"]["start"][:10]}.csv"'
    return resp
