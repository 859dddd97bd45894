"""Pure plotly figure builders for the home page: numbers in, figure dicts out (no Django, no I/O)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from portal.charts import style

Q3 = Decimal("0.001")

# One colour per term of the deliverable formula; the page's legend reads the same table.
SEGMENT_COLOURS: dict[str, str] = {
    "sold": style.BLUE,
    "headroom": style.GREEN,
    "oversold": style.RED,
    "failover reserve": style.AMBER,
    "maintenance": style.VIOLET,
    "safety margin": style.SLATE,
    "fragmentation": style.LIGHT_SLATE,
}


@dataclass(frozen=True)
class Segment:
    name: str
    cu: Decimal


def _d(value: Any) -> Decimal:
    return Decimal(str(value)).quantize(Q3)


def pool_segments(
    *,
    physical: Decimal,
    deliverable: Decimal,
    sold: Decimal,
    reserve: float | Decimal,
    maintenance: float | Decimal,
    safety: float | Decimal,
    fragmentation: float | Decimal,
) -> list[Segment]:
    """deliverable (= sold + headroom) + reserve + maintenance + safety + fragmentation = physical.

    Each deduction is rounded to 0.001 CU on its own, so fragmentation takes the rounding remainder
    (at most 0.002 CU): the bar then sums to the table's physical and deliverable exactly.
    If more is sold than is deliverable the excess is drawn as `oversold`, beyond physical.
    """
    physical, deliverable, sold = _d(physical), _d(deliverable), _d(sold)
    reserve_d, maintenance_d, safety_d = _d(reserve), _d(maintenance), _d(safety)
    fragmentation_d = physical - deliverable - reserve_d - maintenance_d - safety_d
    if abs(fragmentation_d - _d(fragmentation)) > Decimal("0.002"):
        # Deductions above physical clamp deliverable at 0: show the terms as they are.
        fragmentation_d = _d(fragmentation)
    in_deliverable = min(sold, deliverable)
    segments = [
        Segment("sold", in_deliverable),
        Segment("headroom", deliverable - in_deliverable),
        Segment("failover reserve", reserve_d),
        Segment("maintenance", maintenance_d),
        Segment("safety margin", safety_d),
        Segment("fragmentation", fragmentation_d),
    ]
    if sold > deliverable:
        segments.append(Segment("oversold", sold - deliverable))
    return segments


@dataclass(frozen=True)
class PoolBar:
    label: str
    physical: Decimal
    segments: list[Segment]


def capacity_breakdown_figure(bars: Sequence[PoolBar]) -> dict[str, Any]:
    """One stacked horizontal bar per pool, in % of its physical capacity (pools of different
    models count different CU, so shares compare and the hover gives the CU)."""
    names = [name for name in SEGMENT_COLOURS if any(s.name == name for b in bars for s in b.segments)]
    labels = [b.label for b in bars]
    data = []
    for name in names:
        xs, texts = [], []
        for b in bars:
            cu = next((s.cu for s in b.segments if s.name == name), Decimal(0))
            pct = float(cu / b.physical * 100) if b.physical else 0.0
            xs.append(round(pct, 2))
            texts.append(f"{name}: {cu:,.1f} CU ({pct:.1f} % of {b.physical:,.1f} CU physical)")
        data.append(
            {
                "type": "bar",
                "orientation": "h",
                "name": name,
                "y": labels,
                "x": xs,
                "hovertext": texts,
                "hoverinfo": "text",
                "marker": {"color": SEGMENT_COLOURS[name]},
            }
        )
    layout = {
        "barmode": "stack",
        "height": 60 + 30 * len(bars),
        "margin": {"l": 230, "r": 20, "t": 10, "b": 40},
        "xaxis": {"title": {"text": "% of physical capacity"}, "range": [0, 100], "ticksuffix": " %"},
        "yaxis": {"autorange": "reversed"},
        # The page draws the legend (same colours) above the chart, in formula order.
        "showlegend": False,
        **style.bare(),
    }
    return {"data": data, "layout": layout}
