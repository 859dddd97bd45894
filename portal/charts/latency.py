"""Latency against arrival rate for the sizing calculator: numbers in (the answer's
`latency_under_load`), a plotly figure dict out. TTFT above, TPOT below, sharing the rate axis."""

from __future__ import annotations

from typing import Any

from portal.charts import style

P99_COLOUR = style.RED
P50_COLOUR = style.BLUE
SLO_COLOUR = style.INK
PLAN_COLOUR = style.GREEN
BREAK_COLOUR = style.AMBER


def _hline(y: float, axis: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "paper",
        "yref": axis,
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": SLO_COLOUR, "width": 1.5, "dash": "dot"},
    }


def _ms(values: list[float | None]) -> list[float | None]:
    return [None if v is None else round(v * 1000, 3) for v in values]


def latency_figure(lu: dict[str, Any]) -> dict[str, Any]:
    """The fitted curve's p99s (lines) and the answer's simulated p50 / p99 at every rate it simulated
    (markers: the figures the breaking rate comes from) of TTFT and TPOT, in ms, against req/s; the SLO
    as dotted lines, the planning and breaking rates as dashed verticals, the latter naming the half
    that breaks first and whether prefill or decode bounds it."""
    series, slo = lu["series"], lu["slo"]
    rates = series["rate_rps"]
    sim = series["sim"]
    sim_rates = [m["rate_rps"] for m in sim]
    data: list[dict[str, Any]] = []
    for axis, name in (("y", "ttft"), ("y2", "tpot")):
        label = name.upper()
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{label} p99 (curve)",
                "x": rates,
                "y": _ms(series[f"{name}_p99_s"]),
                "yaxis": axis,
                "line": {"color": P99_COLOUR, "dash": "solid" if name == "ttft" else "dashdot"},
                "hovertemplate": f"%{{x:,.1f}} req/s: {label} p99 %{{y:,.1f}} ms<extra></extra>",
            }
        )
        for q, colour in (("p99", P99_COLOUR), ("p50", P50_COLOUR)):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{label} {q} (simulated)",
                    "x": sim_rates,
                    "y": _ms([m[f"{name}_{q}_s"] for m in sim]),
                    "yaxis": axis,
                    "marker": {"color": colour, "symbol": "circle" if name == "ttft" else "diamond", "size": 8},
                    "hovertemplate": f"%{{x:,.1f}} req/s: {label} {q} %{{y:,.1f}} ms (simulated)<extra></extra>",
                }
            )
    plan_shape, plan_note = style.vline(lu["planning_rate_rps"], PLAN_COLOUR, "planning rate", 1.0, anchor="left")
    brk = lu["breaking_rate_rps"]
    why = lu.get("breaks") or {}
    label = f"SLO breaks {brk:,.1f} req/s" + (f": {why['half']} first, {why['bound']}" if why.get("half") else "")
    brk_shape, brk_note = style.vline(brk, BREAK_COLOUR, label, 0.9, anchor="left")
    ttft_top = slo["ttft_p99_s"] * 1000 * 2
    tpot_top = slo["tpot_p99_s"] * 1000 * 2
    layout = {
        **style.bare(),
        "legend": style.legend_below(),
        "margin": {"t": 30, "r": 20, "b": 50, "l": 60},
        "height": 520,
        "xaxis": {"title": {"text": "arrival rate (req/s)"}, "range": [0, rates[-1] if rates else 1]},
        "yaxis": {"title": {"text": "TTFT (ms)"}, "domain": [0.55, 1.0], "range": [0, ttft_top]},
        "yaxis2": {"title": {"text": "TPOT (ms)"}, "domain": [0.0, 0.45], "range": [0, tpot_top], "anchor": "x"},
        "shapes": [
            _hline(slo["ttft_p99_s"] * 1000, "y"),
            _hline(slo["tpot_p99_s"] * 1000, "y2"),
            plan_shape,
            brk_shape,
        ],
        "annotations": [plan_note, brk_note],
    }
    return {"data": data, "layout": layout}
