"""Pure plotly figure builders for the sizing calculator: numbers in, figure dicts out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from portal.charts import style

KV_COLOUR = style.BLUE
P99_COLOUR = style.RED
CAPACITY_COLOUR = style.GREEN
NEEDED_COLOUR = style.INK
PROVISIONED_COLOUR = style.LIGHT_BLUE
COST_COLOUR = style.AMBER
# A per-replica capacity line further out than this many chart widths would squash the
# distribution into a sliver: it is then named at the right edge instead of drawn.
OFF_SCALE = 1.5

_BASE_LAYOUT: dict[str, Any] = {**style.bare(), "legend": style.legend_below(-0.25)}


def _fmt(x: float) -> str:
    return f"{x:,.0f}"


def kv_distribution_figure(
    *, edges: Sequence[float], time_fraction: Sequence[float], p99: float, capacity_per_replica: float
) -> dict[str, Any]:
    """Share of time at each level of concurrent KV tokens (all replicas together), with the p99
    and one replica's KV capacity marked: their ratio is how many replicas the memory needs."""
    centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    widths = [b - a for a, b in zip(edges[:-1], edges[1:], strict=True)]
    data = [
        {
            "type": "bar",
            "name": "share of time",
            "x": centres,
            "y": [round(f * 100, 4) for f in time_fraction],
            "width": widths,
            "marker": {"color": KV_COLOUR},
            "hovertemplate": "%{x:,.0f} KV tokens: %{y:.2f} % of time<extra></extra>",
        }
    ]
    right = float(edges[-1]) if len(edges) else 0.0
    p99_shape, p99_note = style.vline(p99, P99_COLOUR, f"p99 {_fmt(p99)}", 0.97, anchor="right")
    shapes, notes = [p99_shape], [p99_note]
    if capacity_per_replica <= right * OFF_SCALE:
        shape, note = style.vline(
            capacity_per_replica, CAPACITY_COLOUR, f"1 replica holds {_fmt(capacity_per_replica)}", 0.9, anchor="right"
        )
        shapes.append(shape)
        notes.append(note)
        right = max(right, capacity_per_replica)
    else:
        notes.append(
            {
                "x": 0,
                "y": 1.0,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
                "text": f"1 replica holds {_fmt(capacity_per_replica)} KV tokens (off scale →)",
                "font": {"color": CAPACITY_COLOUR},
            }
        )
    layout = {
        **_BASE_LAYOUT,
        "height": 280,
        "margin": {"l": 55, "r": 15, "t": 40, "b": 45},
        "bargap": 0,
        "showlegend": False,
        "xaxis": {"title": {"text": "concurrent KV tokens, all replicas"}, "range": [0, right * 1.03 or 1]},
        "yaxis": {"title": {"text": "% of time"}, "ticksuffix": " %"},
        "shapes": shapes,
        "annotations": notes,
    }
    return {"data": data, "layout": layout}


def day_cost_figure(rows: Sequence[dict[str, Any]], *, currency: str) -> dict[str, Any]:
    """Replicas provisioned (bars) against replicas needed (line) each hour, and the hour's cost
    on a second axis. `rows` are DayCost.to_dict()["rows"]."""
    hours = [r["hour"] for r in rows]
    data = [
        {
            "type": "bar",
            "name": "replicas provisioned",
            "x": hours,
            "y": [r["replicas_provisioned"] for r in rows],
            "marker": {"color": PROVISIONED_COLOUR},
            "hovertemplate": "%{x}:00 — %{y} provisioned<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "line": {"shape": "hvh", "color": NEEDED_COLOUR},
            "name": "replicas needed",
            "x": hours,
            "y": [r["replicas_needed"] for r in rows],
            "hovertemplate": "%{x}:00 — %{y} needed<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"cost per hour ({currency})",
            "x": hours,
            "y": [round(r["cost"], 4) for r in rows],
            "yaxis": "y2",
            "line": {"color": COST_COLOUR, "width": 2},
            "hovertemplate": "%{x}:00 — %{y:,.2f} " + currency + "/h<extra></extra>",
        },
    ]
    peak = max((max(r["replicas_provisioned"], r["replicas_needed"]) for r in rows), default=1)
    top_cost = max((r["cost"] for r in rows), default=1.0)
    layout = {
        **_BASE_LAYOUT,
        "height": 300,
        "margin": {"l": 50, "r": 60, "t": 15, "b": 40},
        "xaxis": {"title": {"text": "hour of day"}, "dtick": 2, "range": [-0.6, 23.6]},
        "yaxis": {
            "title": {"text": "replicas"},
            "rangemode": "tozero",
            "range": [0, peak * 1.15 + 0.5],
            "dtick": max(1, round(peak / 5)),
        },
        "yaxis2": {
            "title": {"text": f"{currency}/h"},
            "overlaying": "y",
            "side": "right",
            "rangemode": "tozero",
            "range": [0, top_cost * 1.15 or 1],
            "showgrid": False,
        },
    }
    return {"data": data, "layout": layout}


def minute_rate_figure(
    *, window_rates: Sequence[float], rates: dict[str, float], used: str, bins: int = 40
) -> dict[str, Any]:
    """How often the trace ran at each one-minute rate (sliding windows), with the four planning
    rates marked and the one sized for drawn solid."""
    top = max([*window_rates, *rates.values(), 1e-9])
    width = top / bins
    counts = [0] * bins
    for x in window_rates:
        counts[min(int(x / width), bins - 1)] += 1
    total = max(len(window_rates), 1)
    data = [
        {
            "type": "bar",
            "name": "share of minutes",
            "x": [width * (i + 0.5) for i in range(bins)],
            "y": [round(c / total * 100, 4) for c in counts],
            "width": [width] * bins,
            "marker": {"color": KV_COLOUR},
            "hovertemplate": "%{x:.3g} req/s: %{y:.2f} % of minutes<extra></extra>",
        }
    ]
    shapes, notes = [], []
    for i, (basis, rate) in enumerate(rates.items()):
        shape, note = style.vline(
            rate, P99_COLOUR if basis == used else NEEDED_COLOUR, f"{basis} {rate:.3g}", 0.97 - i * 0.08, anchor="right"
        )
        if basis != used:
            shape["line"] = {**shape["line"], "width": 1, "dash": "dot"}
        else:
            shape["line"] = {**shape["line"], "dash": "solid"}
        shapes.append(shape)
        notes.append(note)
    layout = {
        **_BASE_LAYOUT,
        "height": 260,
        "margin": {"l": 55, "r": 15, "t": 20, "b": 45},
        "bargap": 0,
        "showlegend": False,
        "xaxis": {"title": {"text": "requests/s over one minute"}, "range": [0, top * 1.05]},
        "yaxis": {"title": {"text": "% of minutes"}, "ticksuffix": " %"},
        "shapes": shapes,
        "annotations": notes,
    }
    return {"data": data, "layout": layout}


def basis_cost_figure(*, costs: dict[str, float], used: str, currency: str) -> dict[str, Any]:
    """Fully loaded cost per hour of sizing for each planning rate, side by side."""
    names = list(costs)
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [round(costs[b], 2) for b in names],
            "marker": {"color": [P99_COLOUR if b == used else PROVISIONED_COLOUR for b in names]},
            "text": [f"{costs[b]:,.2f}" for b in names],
            "textposition": "outside",
            "hovertemplate": "%{x}: %{y:,.2f} " + currency + "/h<extra></extra>",
        }
    ]
    layout = {
        **_BASE_LAYOUT,
        "height": 240,
        "margin": {"l": 55, "r": 15, "t": 20, "b": 40},
        "showlegend": False,
        "xaxis": {"title": {"text": "planning rate"}},
        "yaxis": {"title": {"text": f"{currency}/h"}, "rangemode": "tozero"},
    }
    return {"data": data, "layout": layout}
