"""Quotes by commitment term (docs/contract.md §10): what a CU amount costs per month, over a window, and per
million useful output tokens, under each term the price list has; pure arithmetic, no Django.

A commitment of T months is bought in whole terms: a window of W months takes ⌈W / T⌉ of them and pays for
every hour of each, so `usd_total` counts the months paid past the window and `commitment_end` says when the
last one ends. On demand pays the window's hours only. The cheapest term whose commitments cover the window
(all of them do, in whole terms) is marked `cheapest`; on a tie the shorter commitment wins.
"""

from __future__ import annotations

import calendar
import math
from dataclasses import dataclass
from datetime import datetime

HOURS_PER_MONTH = 730.0  # 8,760 h ÷ 12, the cloud vendors' billing month
OPEN_ENDED_MONTHS = 12  # an open-ended window is quoted over a year (said in each quote's basis)


@dataclass(frozen=True)
class TermRate:
    term: str
    months: int  # 0: on demand
    usd_per_cu_hour: float


def add_months(at: datetime, months: int) -> datetime:
    """The same day and time `months` later (the last day of a shorter month)."""
    y, m = divmod(at.month - 1 + months, 12)
    year, month = at.year + y, m + 1
    return at.replace(year=year, month=month, day=min(at.day, calendar.monthrange(year, month)[1]))


def window_hours(start: datetime, end: datetime | None) -> float:
    end = end or add_months(start, OPEN_ENDED_MONTHS)
    return max((end - start).total_seconds() / 3600.0, 0.0)


def quote_rows(
    *,
    cu: float,
    rates: list[TermRate],
    start: datetime,
    end: datetime | None,
    useful_output_tokens_per_hour: float | None,
) -> list[dict[str, object]]:
    """One row per rate, in the order given. `useful_output_tokens_per_hour`: the workload's useful output
    (None or 0: the per-million figure is None)."""
    hours = window_hours(start, end)
    window_months = hours / HOURS_PER_MONTH
    rows: list[dict[str, object]] = []
    for r in rates:
        per_hour = cu * r.usd_per_cu_hour
        if r.months == 0:
            total, commitment_end, paid_hours = per_hour * hours, None, hours
        else:
            terms = max(1, math.ceil(round(window_months / r.months, 9)))
            commitment_end = add_months(start, terms * r.months)
            paid_hours = terms * r.months * HOURS_PER_MONTH
            total = per_hour * paid_hours
        per_million = (
            per_hour / (useful_output_tokens_per_hour / 1e6)
            if useful_output_tokens_per_hour and useful_output_tokens_per_hour > 0
            else None
        )
        rows.append(
            {
                "term": r.term,
                "usd_per_month": round(per_hour * HOURS_PER_MONTH, 2),
                "usd_total": round(total, 2),
                "usd_per_million_useful_output_tokens": None if per_million is None else round(per_million, 4),
                "commitment_end": commitment_end.isoformat() if commitment_end else None,
                "usd_per_cu_hour": round(r.usd_per_cu_hour, 4),
                "hours_paid": round(paid_hours, 1),
                "cheapest": False,
            }
        )
    if rows:
        best = min(range(len(rows)), key=lambda i: (rows[i]["usd_total"], rates[i].months))
        rows[best]["cheapest"] = True
    return rows
