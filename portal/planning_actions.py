"""What needs action on the planning page (issue 22): pools short in some scenario and case.

One row per short pool, from forecasting.gap's per-pool rows: its most urgent shortfall (the earliest
order-by date; the larger gap on a tie) with the gap, the replicas short and the accelerator to order,
and every other scenario and case in which it is short. Late pools (order-by already past) sort first,
then by order-by date.
"""

from __future__ import annotations

from typing import Any

from forecasting.shortfalls import shortfalls


def action_rows(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for p in pools:
        shorts = shortfalls(p)
        if not shorts:
            continue
        first = shorts[0]
        rows.append(
            {
                "pool": p["pool"],
                "accelerator": p["accelerator"],
                "lead_time_weeks": p["lead_time_weeks"],
                "failure_policy": p["failure_policy"],
                "first": first,
                "others": shorts[1:],
                "late": any(s["late"] for s in shorts),
                "short_in": shorts,
            }
        )
    return sorted(rows, key=lambda r: (not r["late"], r["first"]["order_by"], r["pool"]))
