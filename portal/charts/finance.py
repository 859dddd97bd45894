"""Plotly figure for the finance page (portal/views/finance.py): the month's charges by week, one bar per
tenant, stacked. Pure: numbers in, figure out."""

from __future__ import annotations

from typing import Any

from portal.charts import style

COLORS = [style.BLUE, style.AMBER, style.GREEN, style.PURPLE, style.RED, style.SLATE, style.PINK]


def weekly_charges(weeks: list[str], by_tenant: dict[str, list[float]]) -> dict[str, Any]:
    data = [
        {
            "type": "bar",
            "name": tenant,
            "x": weeks,
            "y": [round(v, 2) for v in values],
            "marker": {"color": COLORS[i % len(COLORS)]},
            "hovertemplate": "%{x}: $%{y:,.2f}<extra>" + tenant + "</extra>",
        }
        for i, (tenant, values) in enumerate(sorted(by_tenant.items()))
    ]
    layout = style.titled(
        "Charges by week", "USD", margin={"l": 60, "r": 10, "t": 36, "b": 40}, height=300, barmode="stack"
    )
    return {"data": data, "layout": layout}
