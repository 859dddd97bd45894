"""/finance/ (docs/contract.md §10): a month's charges for finance — totals by tenant, a chart by week, the
rows a billing system takes, and the exports (CSV, CloudEvents) of `GET /api/v1/charges`. Operators see every
tenant; a tenant member their own; an approver is refused (403), as by the API (telemetry.charges decides).
A bad `period` is a 400 page naming it."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from portal.access import person_required
from portal.charts.finance import weekly_charges
from telemetry.charges import (
    ChargesForbidden,
    ChargesNotFound,
    PeriodInvalid,
    charges,
    check_may_read,
    parse_period,
    weekly_by_tenant,
)

TEMPLATE = "portal/finance.html"


def _week_label(start: datetime, end: datetime) -> str:
    last = end - timedelta(days=1)
    return (
        f"{start:%b} {start.day}–{last.day}"
        if start.month == last.month
        else f"{start:%b} {start.day}–{last:%b} {last.day}"
    )


@require_GET
@person_required(hide=True)
def finance(request: HttpRequest) -> HttpResponse:
    try:
        check_may_read(request.user)
    except ChargesForbidden as exc:
        raise PermissionDenied(str(exc))
    raw = request.GET.get("period") or timezone.now().strftime("%Y-%m")
    try:
        month = parse_period(raw)
    except PeriodInvalid as exc:
        return render(request, TEMPLATE, {"period": raw[:16], "error": f"period: {exc}"}, status=400)
    try:
        body = charges(request.user, month)
        weekly = weekly_by_tenant(request.user, month)
    except ChargesNotFound:
        body, weekly = None, {}
    weeks = [_week_label(a, b) for a, b in month.weeks()]
    return render(
        request,
        TEMPLATE,
        {"period": month.label, "month": month, "body": body, "fig": weekly_charges(weeks, weekly)},
    )
