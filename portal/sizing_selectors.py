"""Catalogue reads for the sizing calculator (/sizing/): what can be sized, and where its first view starts.

The catalogue is platform-wide (no tenant data here); traces are read through
telemetry.selectors.traces_visible_to by the form."""

from __future__ import annotations

from entitlements.models import Accelerator, OperatingPoint, ServedModel


def sizable_models() -> list[tuple[str, str]]:
    """(slug, name) of every model with an operating point, by slug."""
    models = ServedModel.objects.filter(operating_points__isnull=False).distinct().order_by("slug")
    return [(m.slug, m.name) for m in models]


def sizable_accelerators() -> list[tuple[str, str]]:
    """(slug, name) of every accelerator with an operating point, by slug."""
    accs = Accelerator.objects.filter(operating_points__isnull=False).distinct().order_by("slug")
    return [(a.slug, a.name) for a in accs]


def accelerators_by_model() -> dict[str, list[str]]:
    """Model slug → the accelerator slugs with a measured point for it, by slug (the page hides the
    others, issue 22)."""
    by_model: dict[str, list[str]] = {}
    for model_slug, acc_slug in (
        OperatingPoint.objects.values_list("model__slug", "accelerator__slug").distinct().order_by("accelerator__slug")
    ):
        by_model.setdefault(model_slug, []).append(acc_slug)
    return by_model


def has_operating_point(*, model: str, accelerator: str) -> bool:
    return OperatingPoint.objects.filter(model__slug=model, accelerator__slug=accelerator).exists()


def first_latency_bounded_point() -> OperatingPoint | None:
    """The first measured (not ceiling) point with both latency limits, by model slug then pk, with its model."""
    return (
        OperatingPoint.objects.filter(
            is_ceiling=False, ttft_p99_limit_ms__isnull=False, tpot_p99_limit_ms__isnull=False
        )
        .select_related("model")
        .order_by("model__slug", "pk")
        .first()
    )
