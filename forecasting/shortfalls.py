"""A pool's shortfalls across every scenario and case planning shows, most urgent first.

One rule for the planning page's action list (portal.planning_actions) and the order-by alert
(alerts.conditions): both read every scenario (expected, upside, stress) under both cases (healthy,
after failure), so the inbox and planning always count the same late pools (docs/demo.md).
"""

from __future__ import annotations

from datetime import date
from typing import Any

CASE_LABEL = {"healthy": "healthy", "failure": "after failure"}


def _urgency(s: dict[str, Any]) -> tuple[date, float]:
    # The earliest order-by date; on a tie the larger gap.
    return s["order_by"], -float(s["max_gap_cu"])


def shortfalls(pool: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (scenario, case) in which forecasting.gap's pool row is short, most urgent first."""
    out = []
    for scenario, cases in pool["gaps"].items():
        for case, g in cases.items():
            if g.get("first_week") is None:
                continue
            out.append({"scenario": scenario, "case": case, "case_label": CASE_LABEL.get(case, case), **g})
    return sorted(out, key=_urgency)
