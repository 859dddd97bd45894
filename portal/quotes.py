"""A launch request's `quotes` (docs/contract.md §10): its committed CU (the planning answer an approval grants)
in every region asked, priced under each term the price list has, over the request's window.

Each region is quoted in the pool that serves the model there (the scope's home pool when it has one, else the
first by id: the approver may place it elsewhere, and the approval records the quote of the pool it grants in);
the rows add the regions up (entitlements.quotes.summed_quotes). The useful output per hour is the committed
rate × the envelope's mean output × the SLO-met share sizing assumes, so the per-million figure is of the
workload's own volume, not of the capacity bought.
"""

from __future__ import annotations

from typing import Any

from capacity.cost import CostInputs
from entitlements.models import Pool, ServedModel
from entitlements.models.prices import Term
from entitlements.quotes import pool_quotes, summed_quotes
from entitlements.services import scope_pool_id
from portal.models import LaunchRequest
from portal.selectors import Sizing, scenario_rps, window_of

ASSUMED_SLO_MET = CostInputs().slo_met_fraction


def _pool(req: LaunchRequest, model: ServedModel, region: Any) -> Pool | None:
    home = scope_pool_id(tenant=req.tenant, project=None, model=model, region=region, traffic_class=req.traffic_class)
    pools = Pool.objects.filter(model=model, region=region).select_related("accelerator", "region", "operating_point")
    return (pools.filter(pk=home).first() if home else None) or pools.order_by("pk").first()


def request_quotes(req: LaunchRequest, sized: Sizing) -> dict[str, Any]:
    cu = sized.cu.get("committed")
    if cu is None or req.model is None or req.launch_date is None:
        return {"quotes": [], "quotes_basis": {"basis": "needs the model, the launch date and the committed scenario"}}
    window = window_of(req.launch_date, req.end_date)
    rps = scenario_rps(req, "committed")
    mean_out = sized.how.output_mean if sized.how else None
    useful = rps * mean_out * 3600 * ASSUMED_SLO_MET if rps and mean_out else None
    parts, pools = [], []
    for row in req.region_rows.select_related("region"):
        pool = _pool(req, req.model, row.region)
        if pool is None:
            continue
        pools.append(pool.slug)
        parts.append(
            pool_quotes(pool, cu=float(cu), start=window.start, end=window.end, useful_output_tokens_per_hour=useful)
        )
    basis = (
        f"{cu} CU in each of {', '.join(pools) or 'no pool'} from {req.launch_date}"
        + (f" to {req.end_date}" if req.end_date else " (open-ended: quoted over 12 months)")
        + "; whole commitments covering the window, at each pool's fully loaded $ per CU-hour per term"
    )
    return {"quotes": summed_quotes(parts), "quotes_basis": {"pools": pools, "cu": str(cu), "basis": basis}}


def quotes_in_words(answer: dict[str, Any]) -> dict[str, Any]:
    """A `{quotes, quotes_basis}` answer (a launch request's, or the calculator's: sizing.quotes) as the pages
    show it (portal/intake/_quotes.html): each term's words beside its figures, and the basis."""
    rows = [{**row, "label": Term(row["term"]).label} for row in answer["quotes"]]
    return {"rows": rows, "basis": answer["quotes_basis"]["basis"]}
