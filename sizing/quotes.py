"""The sizing answer's `quotes` (docs/contract.md §10): the recommended CU (`cu_to_buy`, else `capacity_units`)
priced under every term the price list has, in the pool that would serve it.

The pool is the one serving the model on the answer's accelerator in the asked `region` (optional; default
the first such pool by region): a quote is the pool's own $ per CU-hour at each term (entitlements.quotes),
the rate its statement and charges would bill. The calculator has no window, so the quote runs from today
for `quote_months` (default 12, 1 to 36). No pool serving it: `quotes: []` and the basis says why.
"""

from __future__ import annotations

from datetime import datetime, time
from typing import Any

from django.utils import timezone

from capacity.input_errors import SizingInputError
from capacity.quotes import add_months
from entitlements.pool_price import serving_pool
from entitlements.quotes import pool_quotes
from sizing.parsing import parse_region

DEFAULT_MONTHS = 12
MAX_MONTHS = 36


def _months(payload: Any) -> int:
    months = payload.get("quote_months", DEFAULT_MONTHS)
    if isinstance(months, bool) or not isinstance(months, int) or not 1 <= months <= MAX_MONTHS:
        raise SizingInputError("quote_months", f"a whole number of months from 1 to {MAX_MONTHS}")
    return months


def check_quote_input(payload: Any) -> None:
    """Before sizing runs: a bad `region` or `quote_months` is a 400 naming it."""
    _months(payload)
    parse_region(payload.get("region"))


def sizing_quotes(payload: Any, body: dict[str, Any], prepared: Any) -> dict[str, Any]:
    months = _months(payload)
    cu = float(body.get("cu_to_buy") or body["capacity_units"])
    accelerator = body["operating_point_used"]["accelerator"]
    pool = serving_pool(prepared.catalogue.model.slug, accelerator, payload.get("region") or None)
    start = datetime.combine(timezone.now().date(), time.min, tzinfo=timezone.get_current_timezone())
    end = add_months(start, months)
    window = {"start": start.isoformat(), "end": end.isoformat()}
    if pool is None:
        why = f"no pool serves {prepared.catalogue.model.slug} on {accelerator}: nothing to quote"
        return {"quotes": [], "quotes_basis": {"pool": None, "cu": cu, "window": window, "basis": why}}
    ci = prepared.inp.cost_inputs
    useful = float(body["output_tokens_per_s"]) * 3600 * ci.slo_met_fraction * (1 - ci.retry_waste_fraction)
    rows = pool_quotes(pool, cu=cu, start=start, end=end, useful_output_tokens_per_hour=useful)
    basis = (
        f"{cu:,.1f} CU in pool {pool.slug} ({pool.region.slug}) for {months} months from {start.date()}, "
        "at the pool's fully loaded $ per CU-hour under each term of the price list"
    )
    return {"quotes": rows, "quotes_basis": {"pool": pool.slug, "cu": cu, "window": window, "basis": basis}}
