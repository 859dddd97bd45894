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


@register.simple_tag
def launch_latency(req: Any, sizing: Any) -> dict[str, Any]:
    """Latency under load of a launch request's committed rate on the pool it would be granted in (the
    chosen one, else the first that fits its SLO), on that pool's own operating point."""
    from capacity.input_errors import SizingInputError
    from capacity.sizing import size
    from portal.selectors import _committed_rps
    from portal.sizing_fit import launch_shape, pool_sizing_input
    from sizing.latency_answer import latency_fields

    pools = [ps for rs in getattr(sizing, "regions", []) for ps in rs.pools]
    pick = next((ps for ps in pools if ps.chosen), None) or next(
        (ps for ps in pools if ps.fit is not None and not ps.fit.error), None
    )
    rps, shape = _committed_rps(req), launch_shape(req)
    if pick is None or not rps or shape is None or req.ttft_p99_ms is None or req.tpot_p99_ms is None:
        return {
            "latency_under_load": {
                "unavailable": "needs the envelope, the latency SLO, a committed rate and a pool that fits"
            }
        }
    inp = pool_sizing_input(pick.pool, rps, req, shape)
    try:
        result = size(inp)
    except SizingInputError as e:
        return {"latency_under_load": {"unavailable": f"{e.field}: {e.message}"}}
    return {"pool": pick.pool.slug, **latency_fields(inp, result, pick.pool.operating_point_id)}
