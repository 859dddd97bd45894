"""Plotly figure dicts for the planning pages. Pure functions: data in, figure out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from forecasting.candidates import METHOD_WORDS
from portal.charts import style

SCENARIO_STYLE = {
    "committed": {"color": style.GREY, "dash": "dot"},
    "expected": {"color": style.PLOTLY_BLUE, "dash": "solid"},
    "upside": {"color": style.PLOTLY_ORANGE, "dash": "solid"},
    "stress": {"color": style.PLOTLY_RED, "dash": "solid"},
}


def _layout(title: str, y: str) -> dict[str, Any]:
    return style.titled(title, y, margin={"l": 50, "r": 10, "t": 36, "b": 36}, height=300)


def pool_fan(row: dict[str, Any]) -> dict[str, Any]:
    """Weekly peak demand per scenario (a fan from committed to stress) against deliverable supply."""
    x = [w["start"].isoformat() for w in row["weeks"]]
    data: list[dict[str, Any]] = []
    for name in ("expected", "upside", "stress"):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{name} (peak hour)",
                "x": x,
                "y": [round(w[f"{name}_cu"], 2) for w in row["weeks"]],
                "line": SCENARIO_STYLE[name],
                # Fill between successive scenarios so the band reads as the forecast's spread.
                **({"fill": "tonexty", "fillcolor": "rgba(255,127,14,0.12)"} if name != "expected" else {}),
            }
        )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "committed (sold)",
            "x": x,
            "y": [round(w["committed_cu"], 2) for w in row["weeks"]],
            "line": SCENARIO_STYLE["committed"],
        }
    )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": "deliverable (healthy)",
            "x": x,
            "y": [round(w["healthy_cu"], 2) for w in row["weeks"]],
            "line": {"color": style.PLOTLY_GREEN, "shape": "hv"},
        }
    )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"deliverable ({row['failure_policy']} lost)",
            "x": x,
            "y": [round(w["failure_cu"], 2) for w in row["weeks"]],
            "line": {"color": style.PLOTLY_GREEN, "dash": "dash", "shape": "hv"},
        }
    )
    return {"data": data, "layout": _layout(f"{row['pool']}: demand vs supply, 26 weeks", "CU")}


def series_fan(s: dict[str, Any]) -> dict[str, Any]:
    """Last week observed, then two weeks hour by hour: expected, upside and stress."""
    start = s["start"]
    hist = s["history"]
    hx = [(start - timedelta(hours=len(hist) - i)).isoformat() for i in range(len(hist))]
    n = len(s["hourly"]["expected"])
    fx = [(start + timedelta(hours=i)).isoformat() for i in range(n)]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "arrived (admitted + throttled)",
            "x": hx,
            "y": hist,
            "line": {"color": style.CHARCOAL},
        }
    ]
    for name in ("expected", "upside", "stress"):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "x": fx,
                "y": s["hourly"][name],
                "line": SCENARIO_STYLE[name],
            }
        )
    return {"data": data, "layout": _layout(f"{s['tenant']} · {s['model']} @ {s['region']}", "CU (hourly mean)")}


def series_backtest(s: dict[str, Any]) -> dict[str, Any] | None:
    """The forecast the chosen method made N weeks ago (the backtest's last origin) against what then
    happened, week by week (docs/forecasting.md); None without a backtest."""
    chart = (s.get("selection") or {}).get("chart") or {}
    if not chart:
        return None
    weeks = list(range(1, len(chart["actual"]) + 1))
    layout = _layout(
        f"made {chart['made_weeks_ago']} weeks ago: {METHOD_WORDS.get(s['method'], s['method'])} vs what happened",
        "CU (weekly mean)",
    )
    layout["height"] = 200
    layout["xaxis"] = {"title": {"text": "weeks after the forecast was made"}}
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "happened",
                "x": weeks,
                "y": chart["actual"],
                "line": {"color": style.CHARCOAL},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"forecast ({METHOD_WORDS.get(s['method'], s['method'])})",
                "x": weeks,
                "y": chart["forecast"],
                "line": SCENARIO_STYLE["expected"],
            },
        ],
        "layout": layout,
    }
