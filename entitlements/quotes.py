"""Quotes for a CU amount in a pool, one row per term the price list has (docs/contract.md §10).

Each term's $ per CU-hour is the pool's own fully loaded rate with its accelerators priced at that term's row
(entitlements.cu_hour_rate with `term`): the figure the statement and charges bill an entitlement of that term
at, so a quote, a statement and a charge agree. capacity.quotes does the arithmetic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from capacity.quotes import TermRate, quote_rows
from entitlements.cu_hour_rate import pool_cu_hour_rate
from entitlements.models import Pool
from entitlements.models.prices import TERM_MONTHS
from entitlements.prices import terms_priced


def pool_term_rates(pool: Pool) -> list[TermRate]:
    rates = []
    for term in terms_priced(pool.accelerator_id, pool.region_id):
        rate = pool_cu_hour_rate(pool, term).usd_per_cu_hour
        if rate is not None:
            rates.append(TermRate(term, TERM_MONTHS[term], rate))
    return rates


def pool_quotes(
    pool: Pool, *, cu: float, start: datetime, end: datetime | None, useful_output_tokens_per_hour: float | None
) -> list[dict[str, Any]]:
    return quote_rows(
        cu=cu,
        rates=pool_term_rates(pool),
        start=start,
        end=end,
        useful_output_tokens_per_hour=useful_output_tokens_per_hour,
    )


def summed_quotes(parts: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Quotes of one request over several pools (a launch request's regions): a term is quoted only where every
    pool has it; money adds up, the commitment ends at the latest, the cheapest is marked again."""
    if not parts:
        return []
    terms = [row["term"] for row in parts[0] if all(any(r["term"] == row["term"] for r in p) for p in parts)]
    out = []
    for term in terms:
        rows = [next(r for r in p if r["term"] == term) for p in parts]
        ends = [r["commitment_end"] for r in rows if r["commitment_end"]]
        per_m = [r["usd_per_million_useful_output_tokens"] for r in rows]
        out.append(
            {
                "term": term,
                "usd_per_month": round(sum(r["usd_per_month"] for r in rows), 2),
                "usd_total": round(sum(r["usd_total"] for r in rows), 2),
                "usd_per_million_useful_output_tokens": (None if None in per_m else round(sum(per_m) / len(per_m), 4)),
                "commitment_end": max(ends) if ends else None,
                "cheapest": False,
            }
        )
    if out:
        best = min(range(len(out)), key=lambda i: (out[i]["usd_total"], TERM_MONTHS[out[i]["term"]]))
        out[best]["cheapest"] = True
    return out
