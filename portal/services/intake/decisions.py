"""An approver's decisions on a submitted launch request: approve (the committed CU in every region, all or
nothing), partially approve (a CU per region), reject and return (a comment, nothing granted)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any
from uuid import UUID

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from entitlements.commitments import checked_term, commitment_end
from entitlements.services import ENVELOPE_FIELDS, Envelope, OversellError, ScopePoolConflict, entitlement_grant
from portal.intake_errors import HeadroomGone
from portal.models import LaunchRequest, LaunchRequestRegion
from portal.selectors import size_request, window_of
from portal.services.intake import steps
from portal.services.intake.placement import Placement, place


def _conclude(
    req: LaunchRequest, actor: Any, *, method: str, step: str, comment: str, changes: dict | None = None
) -> LaunchRequest:
    """What every decision ends with: the move, who decided when and why, the save and the event."""
    before = req.state
    steps.move(req, method)
    req.decided_by = actor
    req.decided_at = timezone.now()
    req.decision_comment = comment
    steps.save(req)
    steps.event(req, actor, step, before, comment, changes)
    return req


def _require_comment(comment: str, why: str) -> str:
    comment = (comment or "").strip()
    if not comment:
        raise ValidationError({"comment": f"required: {why}"})
    return comment


def _envelope(req: LaunchRequest) -> Envelope:
    return Envelope(**{name: getattr(req, name) for name in ENVELOPE_FIELDS})


def _grant(
    req: LaunchRequest, actor: Any, row: LaunchRequestRegion, cu: Decimal, placement: Placement, term: str
) -> dict[str, Any]:
    window = window_of(placement.start, req.end_date)
    try:
        ent = entitlement_grant(
            actor=actor,
            reason=f"launch request {req.uuid}: {req.title}",
            tenant=req.tenant,
            model=req.model,  # type: ignore[arg-type]  # required at submission
            region=row.region,
            traffic_class=req.traffic_class,
            cu=cu,
            starts_at=window.start,
            ends_at=window.end,
            envelope=_envelope(req),
            pool=placement.pools.get(row.region.slug),
            # docs/contract.md §10: the term the approver chose, committed in whole terms covering the window
            term=term,
            committed_until=commitment_end(term, window.start, window.end),
        )
    except ScopePoolConflict as exc:
        raise ValidationError({f"pool_{row.region.slug}": "; ".join(exc.messages)})
    except OversellError as exc:
        detail = "; ".join(exc.messages)
        raise HeadroomGone(f"not enough headroom in {row.region.slug} any more: {detail}. Nothing was granted.")
    row.approved_cu = ent.cu
    row.entitlement = ent
    row.save(update_fields=["approved_cu", "entitlement"])
    return {
        "approved_cu": str(ent.cu),
        "pool": ent.pool.slug,
        "entitlement": str(ent.uuid),
        "term": ent.term,
        "committed_until": ent.committed_until.isoformat() if ent.committed_until else None,
    }


def _committed_cu(req: LaunchRequest) -> Decimal:
    committed = size_request(req, []).cu["committed"]
    if committed is None or committed <= 0:
        raise ValidationError({"committed_value": "the committed scenario gives no capacity to grant"})
    return committed


@transaction.atomic
def launch_request_approve(
    *,
    actor: Any,
    request: LaunchRequest | UUID | str,
    comment: str = "",
    start_date: Any = None,
    pools: dict[str, Any] | None = None,
    term: str = "on_demand",
) -> LaunchRequest:
    """Grant the committed CU in every region, all or nothing: one OversellError rolls back every
    grant and leaves the request submitted. `start_date` (default the launch date), `pools`
    (region slug -> pool slug, default per region: default_pool) and `term` (a term of the price list's
    quotes, default on demand) are the approver's choices."""
    term = checked_term(term or "on_demand")
    req = steps.lock(actor, request)
    steps.check_may(req, actor, "approve")
    steps.check_state(req, "approve", "approve")
    cu = _committed_cu(req)
    rows = list(req.region_rows.select_related("region"))
    placement = place(req, start_date, pools, {row.region.slug: cu for row in rows})
    granted = {
        row.region.slug: {**_grant(req, actor, row, cu, placement, term), "requested_cu": str(cu)} for row in rows
    }
    return _conclude(
        req, actor, method="approve", step="approve", comment=comment, changes={"regions": granted, "term": term}
    )


def _parse_region_cu(req: LaunchRequest, region_cu: dict[str, Any], committed: Decimal) -> dict[str, Decimal]:
    rows = {row.region.slug: row for row in req.region_rows.select_related("region")}
    errors: dict[str, str] = {}
    parsed: dict[str, Decimal] = {}
    unknown = sorted(set(region_cu) - set(rows))
    for slug in unknown:
        errors[f"regions.{slug}"] = "not a region of this request"
    for slug in rows:
        raw = region_cu.get(slug)
        if raw is None or raw == "":
            errors[f"regions.{slug}"] = "enter the CU to approve here (0 for none)"
            continue
        try:
            value = Decimal(str(raw)).quantize(Decimal("0.001"))
        except (InvalidOperation, ValueError):
            errors[f"regions.{slug}"] = "enter a number of CU"
            continue
        if value < 0:
            errors[f"regions.{slug}"] = "cannot be negative"
        elif value > committed:
            errors[f"regions.{slug}"] = f"more than the {committed} CU requested"
        else:
            parsed[slug] = value
    if not errors and not any(parsed.values()):
        errors["regions"] = "approve some CU in at least one region, or reject the request"
    if errors:
        raise ValidationError(errors)
    return parsed


@transaction.atomic
def launch_request_partially_approve(
    *,
    actor: Any,
    request: LaunchRequest | UUID | str,
    region_cu: dict[str, Any],
    comment: str,
    start_date: Any = None,
    pools: dict[str, Any] | None = None,
    term: str = "on_demand",
) -> LaunchRequest:
    """Per region an approver-chosen CU (0 = nothing there); every grant still checks headroom."""
    term = checked_term(term or "on_demand")
    req = steps.lock(actor, request)
    steps.check_may(req, actor, "partially_approve")
    steps.check_state(req, "partially_approve", "partially approve")
    comment = _require_comment(comment, "say why only part is approved")
    committed = _committed_cu(req)
    amounts = _parse_region_cu(req, region_cu, committed)
    placement = place(req, start_date, pools, amounts)
    granted: dict[str, Any] = {}
    for row in req.region_rows.select_related("region"):
        cu = amounts[row.region.slug]
        if cu > 0:
            granted[row.region.slug] = _grant(req, actor, row, cu, placement, term)
        else:
            row.approved_cu = Decimal(0)
            row.save(update_fields=["approved_cu"])
            granted[row.region.slug] = {"approved_cu": "0.000"}
        granted[row.region.slug]["requested_cu"] = str(committed)  # the notice says "approved 6.0 of 10.0 CU"
    return _conclude(
        req, actor, method="partially_approve", step="partially_approve", comment=comment,
        changes={"regions": granted, "term": term},
    )  # fmt: skip


def _decide_with_comment(
    actor: Any, request: LaunchRequest | UUID | str, *, method: str, step: str, comment: str, why: str
) -> LaunchRequest:
    """Reject and return: an approver's decision that needs a comment and creates nothing."""
    req = steps.lock(actor, request)
    steps.check_may(req, actor, method)
    steps.check_state(req, method, step)
    return _conclude(req, actor, method=method, step=step, comment=_require_comment(comment, why))


@transaction.atomic
def launch_request_reject(*, actor: Any, request: LaunchRequest | UUID | str, comment: str) -> LaunchRequest:
    return _decide_with_comment(
        actor, request, method="reject", step="reject", comment=comment, why="say why the request is rejected"
    )


@transaction.atomic
def launch_request_return(*, actor: Any, request: LaunchRequest | UUID | str, comment: str) -> LaunchRequest:
    return _decide_with_comment(
        actor,
        request,
        method="return_to_requester",
        step="return",
        comment=comment,
        why="say what the requester should change",
    )
