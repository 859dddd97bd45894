"""Reads of forecast results. Tenant-facing reads go through `series_visible_to(user)`."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from entitlements import roles
from forecasting.candidates import NAIVE
from forecasting.models import ForecastRun, ForecastSeries


def latest_run() -> ForecastRun | None:
    return ForecastRun.objects.filter(status=ForecastRun.Status.SUCCEEDED).order_by("-finished_at").first()


def current_run() -> ForecastRun | None:
    """The newest run of any status: what the status row shows."""
    return ForecastRun.objects.order_by("-created_at").first()


def series_visible_to(user: Any, run: ForecastRun | None = None) -> QuerySet[ForecastSeries]:
    run = run or latest_run()
    if run is None:
        return ForecastSeries.objects.none()
    qs = ForecastSeries.objects.filter(run=run)
    if roles.is_staff_role(user):
        return qs
    tenant = roles.tenant_of(user)
    return qs.filter(tenant=tenant) if tenant is not None else qs.none()


def series_summary(s: ForecastSeries) -> dict[str, Any]:
    return {
        "tenant": s.tenant_slug,
        "model": s.model,
        "region": s.region,
        "method": s.method,
        "history_hours": s.history_hours,
        "start": s.start,
        "history": s.history,
        "hourly": s.hourly,
        "weekly": s.weekly,
        "error_metric": s.error_metric,
        "candidates": s.candidates,
        "holdout_error": s.holdout_error,
        "coverage": s.coverage,
        "best_naive_holdout_error": best_naive_holdout(s.candidates),
        "note": s.note,
        # How it was chosen at the lead time and what earlier forecasts of it did (docs/forecasting.md).
        "selection": s.selection,
        "realised": s.realised,
    }


def best_naive_holdout(candidates: list[dict[str, Any]]) -> float | None:
    """The better seasonal-naive baseline on the holdout: what the chosen model has to beat."""
    errors = [c["holdout_error"] for c in candidates if c["method"] in NAIVE and c["holdout_error"] is not None]
    return min(errors) if errors else None


def run_summary(run: ForecastRun | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {
        "id": str(run.id),
        "status": run.status,
        "trigger": run.trigger,
        "progress": run.progress,
        "attempts": run.attempts,
        "series_count": run.series_count,
        # The fan-out's progress: chunks written of the chunks planned (0 of 0 until the run is planned).
        "chunks_done": run.chunks_done,
        "chunks_total": run.chunks_total,
        "parameters": run.parameters,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "error": run.error,
    }
