"""Plotly figure dicts for the approver's review page. Pure: numbers in, dicts out.

Per pool: what is already sold over the window (a step area), this request stacked on top, and
the deliverable line. Where the stack crosses the line, approving would oversell that pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from portal.charts import style

SOLD = style.PLOTLY_GREY
REQUEST = style.PLOTLY_BLUE
LIMIT = style.PLOTLY_RED


def pool_headroom_figure(
    *,
    pool_slug: str,
    steps: Sequence[tuple[datetime, Decimal]],
    deliverable_cu: Decimal,
    request_cu: Decimal,
    request_counts: bool,
    granted_cu: Decimal | None = None,
) -> dict[str, Any]:
    """`steps`: (instant, sold CU from then on), first at the window start, last at its end.
    `granted_cu`: once decided, what this pool granted the request (stacked instead of the ask;
    `steps` must then leave the request's own grants out, or they would be drawn twice)."""
    x = [t.isoformat() for t, _ in steps]
    sold = [float(cu) for _, cu in steps]
    if granted_cu is not None:
        stacked = [float(granted_cu)] * len(x)
        label = f"granted to this request ({float(granted_cu):,.3f} CU)"
    else:
        stacked = [float(request_cu) if request_counts else 0.0] * len(x)
        label = "this request" if request_counts else "this request (best effort: not sold)"
    headroom = [float(deliverable_cu) - s for s in sold]
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "lines",
                "name": "already sold",
                "x": x,
                "y": sold,
                "stackgroup": "cu",
                "line": {"shape": "hv", "color": SOLD},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": label,
                "x": x,
                "y": stacked,
                "stackgroup": "cu",
                "line": {"shape": "hv", "color": REQUEST},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "deliverable",
                "x": x,
                "y": [float(deliverable_cu)] * len(x),
                "line": {"dash": "dash", "color": LIMIT},
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "headroom before this request",
                "x": x,
                "y": headroom,
                "visible": "legendonly",
                "line": {"shape": "hv"},
            },
        ],
        "layout": {
            "title": {
                "text": f"{pool_slug}: sold + {'granted' if granted_cu is not None else 'this request'} vs deliverable (CU)"
            },
            "height": 300,
            "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
            "yaxis": {"title": {"text": "CU"}, "rangemode": "tozero"},
            "legend": {"orientation": "h"},
        },
    }
