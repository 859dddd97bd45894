"""`{% latency_figure sizing as fig %}`: the latency-vs-load figure of a sizing answer, so the partial
templates/portal/sizing/_latency.html is included with one line and no view change."""

from __future__ import annotations

from typing import Any

from django import template

from portal.charts.latency import latency_figure as build

register = template.Library()


@register.simple_tag
def latency_figure(sizing: dict[str, Any] | None) -> dict[str, Any] | None:
    if not sizing:
        return None
    lu = sizing.get("latency_under_load") or {}
    if "series" not in lu:
        return None
    return build({**lu, "breaking_rate_rps": sizing["slo_breaking_rate_rps"]})


@register.filter
def pct(share: float | None) -> str:
    """0.9934 → '99.3 %'; None → '—'."""
    return "—" if share is None else f"{share * 100:.1f} %"


@register.filter
def ms(seconds: float | None) -> str:
    """Seconds as milliseconds, '—' for none (a p99 past saturation)."""
    return "—" if seconds is None else f"{seconds * 1000:,.0f} ms" if seconds >= 0.1 else f"{seconds * 1000:,.1f} ms"
