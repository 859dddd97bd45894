"""Writes to the source of truth. Every grant, amendment and revocation checks headroom over
its whole window under row locks on every pool it touches (entitlements.pool_locks), and is
captured by the history triggers with who and why.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from entitlements import limits, reserve_rules
from entitlements.commitments import check_amend, checked_term
from entitlements.concurrency import derive_max_concurrency
from entitlements.history import history_context
from entitlements.models import Entitlement, FailoverReserve, Pool, Region, ServedModel, TrafficClass
from entitlements.models.grants import BORROWING_CLASS
from entitlements.models.supply import as_cu
from entitlements.pool_choice import choose_pool, headroom_rows

# OversellError and ScopePoolConflict are the grant's errors: its callers catch them from here too.
from entitlements.pool_locks import OversellError, ScopePoolConflict, check_headroom, lock_pools, pool_refresh
from entitlements.selectors import Window, peak_sold, pool_sold_peak, scope_entitlements


def _validate_borrowing(traffic_class: str, overage: str, borrowing_limit_cu: Decimal) -> None:
    """Only best_effort borrows (docs/contract.md §5); the database refuses it too (ent_only_best_effort_borrows)."""
    if traffic_class == BORROWING_CLASS:
        return
    if borrowing_limit_cu != 0:
        raise ValidationError({"borrowing_limit_cu": f"only {BORROWING_CLASS} borrows; {traffic_class} must have 0"})
    if overage != Entitlement.Overage.THROTTLE:
        raise ValidationError({"overage": f"only {BORROWING_CLASS} borrows; {traffic_class} overage is throttle"})


@dataclass(frozen=True)
class Envelope:
    """max_concurrency = DERIVE: the grant derives the cap for the pool it chooses (entitlements.concurrency)."""

    max_prompt_tokens: int
    max_output_tokens: int
    prompt_p50: int
    prompt_p95: int
    output_p50: int
    output_p95: int
    max_concurrency: int
    ttft_p99_ms: int
    tpot_p99_ms: int
    streaming: bool = True


DERIVE = 0  # an Envelope's max_concurrency that asks the grant to derive the cap


def _validate_window(starts_at: datetime, ends_at: datetime | None) -> None:
    if ends_at is not None and ends_at <= starts_at:
        raise ValidationError({"ends_at": "must be after starts_at"})


@transaction.atomic
def entitlement_grant(
    *,
    actor: Any,
    reason: str,
    tenant: Any,
    model: ServedModel,
    region: Region,
    traffic_class: str,
    cu: Decimal | float | str,
    starts_at: datetime,
    ends_at: datetime | None,
    envelope: Envelope,
    project: Any = None,
    pool: Pool | None = None,
    overage: str = Entitlement.Overage.THROTTLE,
    borrowing_limit_cu: Decimal | float | str = 0,
    lending_limit_cu: Decimal | float | str | None = None,
    weight: float | None = None,
    spillover_target: Entitlement | None = None,
    spillover_budget_cu: Decimal | float | str | None = None,
    overflow: str = Entitlement.Overflow.ALLOW,
    term: str = "on_demand",
    committed_until: datetime | None = None,
    **limit_values: Any,
) -> Entitlement:
    """`limit_values`: any of entitlements.limits.LIMIT_FIELDS (budgets, max_rps, burst). The steps, each a
    function below: the input alone (_checked_cu, _validate_window, _checked_class), the pools that may hold
    it (_serving_pools), the pool it goes to with its headroom checked under the locks (_placed), then the
    row with its sharing terms (_sharing_terms) and envelope (_sized_envelope), checked whole by full_clean."""
    unknown = set(limit_values) - set(limits.LIMIT_FIELDS)
    if unknown:
        raise ValidationError({sorted(unknown)[0]: "unknown field"})
    cu_d = _checked_cu(cu)
    _validate_window(starts_at, ends_at)
    tc = _checked_class(traffic_class, overage, as_cu(borrowing_limit_cu))
    serving = _serving_pools(model, region, pool)
    scope = {"tenant": tenant, "project": project, "model": model, "region": region, "traffic_class": tc.slug}
    chosen = _placed(scope, serving, pool, Window(starts_at, ends_at), cu_d, counts_as_sold=tc.counts_as_sold)
    terms = _sharing_terms(
        overage=overage,
        borrowing_limit_cu=borrowing_limit_cu,
        lending_limit_cu=lending_limit_cu,
        weight=weight,
        spillover_target=spillover_target,
        spillover_budget_cu=spillover_budget_cu,
        overflow=overflow,
    )
    ent = Entitlement(
        **{**scope, "traffic_class": tc},
        pool=chosen,
        starts_at=starts_at,
        ends_at=ends_at,
        cu=cu_d,
        **terms,
        term=checked_term(term),
        committed_until=committed_until,
        **_sized_envelope(envelope, chosen, cu_d).__dict__,
        **limit_values,
    )
    _limit_defaults(ent, set(limit_values))
    ent.full_clean()
    with history_context(actor=actor, reason=reason):
        ent.save()
    return ent


def _checked_cu(cu: Decimal | float | str) -> Decimal:
    cu_d = as_cu(cu)
    if cu_d <= 0:
        raise ValidationError({"cu": "must be greater than 0"})
    return cu_d


def _checked_class(traffic_class: str, overage: str, borrowing_limit_cu: Decimal) -> TrafficClass:
    """The grant's traffic class: one that exists, and its borrowing terms allowed (only best_effort borrows)."""
    tc = TrafficClass.objects.filter(slug=traffic_class).first()
    if tc is None:
        raise ValidationError({"traffic_class": f"unknown traffic class '{traffic_class}'"})
    _validate_borrowing(tc.slug, overage, borrowing_limit_cu)
    return tc


def _serving_pools(model: ServedModel, region: Region, pool: Pool | None) -> list[Pool]:
    """The pools serving `model` in `region` (pk order); a named pool must be one of them."""
    serving = list(Pool.objects.filter(model=model, region=region).order_by("pk"))
    if pool is not None and pool.pk not in {p.pk for p in serving}:
        raise ValidationError({"pool": f"pool {pool.slug} does not serve {model.slug} in {region.slug}"})
    if not serving:
        raise ValidationError({"region": f"no pool serves {model.slug} in {region.slug}"})
    return serving


def _placed(
    scope: dict[str, Any], serving: list[Pool], pool: Pool | None, window: Window, cu: Decimal, *, counts_as_sold: bool
) -> Pool:
    """The pool the grant goes to, its headroom checked, under the locks of every pool that could hold the scope
    (so two first grants of one scope serialise and cannot place it in two pools). The one pool rule
    (entitlements.pool_choice, issue 34.2): the home pool, else the most headroom after the grant; the launch
    sizing panel and the approval's default call the same function."""
    locked = lock_pools({p.pk for p in serving})
    home = scope_pool_id(**scope)
    if home is not None and pool is not None and pool.pk != home:
        label = _scope_label(**scope)
        raise ScopePoolConflict(
            {"pool": f"{label} lives in pool {locked[home].slug}, not {pool.slug}: move the whole scope instead"}
        )
    # Only the pools the rule can pick are read (a scope with a home, or a named pool: that one pool), each once:
    # the check below reuses the peak read here under the same locks.
    if home is not None:
        candidates = [locked[home]]
    elif pool is not None:
        candidates = [locked[pool.pk]]
    else:
        candidates = [locked[p.pk] for p in serving]
    rows = headroom_rows(candidates, window)
    choice = choose_pool(rows, cu=cu, home_pk=home, counts_as_sold=counts_as_sold)
    assert choice is not None  # `serving` is not empty
    chosen = choice.pool
    if counts_as_sold:
        peak = next(chosen.deliverable_cu - headroom for p, headroom in rows if p.pk == chosen.pk)
        try:
            check_headroom(chosen, window, cu, peak=peak)
        except OversellError as exc:
            if home is not None:
                # The scope cannot go elsewhere: a conflict (409); the message names its pool and headroom.
                raise ScopePoolConflict(exc.message_dict)
            raise
    return chosen


def _sharing_terms(
    *,
    overage: str,
    borrowing_limit_cu: Decimal | float | str,
    lending_limit_cu: Decimal | float | str | None,
    weight: float | None,
    spillover_target: Entitlement | None,
    spillover_budget_cu: Decimal | float | str | None,
    overflow: str,
) -> dict[str, Any]:
    """The borrowing, lending, fair-share and spillover terms as the row stores them (CU quantised, the weight a
    float, unset ones None: the pool's or class's default applies); Entitlement.clean checks them together."""
    return {
        "overage": overage,
        "borrowing_limit_cu": as_cu(borrowing_limit_cu),
        "lending_limit_cu": None if lending_limit_cu is None else as_cu(lending_limit_cu),
        "weight": None if weight is None else float(weight),
        "spillover_target": spillover_target,
        "spillover_budget_cu": None if spillover_budget_cu is None else as_cu(spillover_budget_cu),
        "overflow": overflow,
    }


def _sized_envelope(envelope: Envelope, pool: Pool, cu: Decimal) -> Envelope:
    """max_concurrency DERIVE: the cap the chosen pool gives this many CU (entitlements.concurrency)."""
    if envelope.max_concurrency != DERIVE:
        return envelope
    cap = derive_max_concurrency(pool=pool, cu=float(cu), envelope=envelope).value
    return dataclasses.replace(envelope, max_concurrency=cap)


# The workload envelope's fields, in one place: the API, the snapshot and launch requests read this.
ENVELOPE_FIELDS: tuple[str, ...] = tuple(Envelope.__dataclass_fields__)
AMENDABLE = {"cu", "starts_at", "ends_at", "overage", "borrowing_limit_cu", "lending_limit_cu", "weight",
             "spillover_target", "spillover_budget_cu", "overflow", *ENVELOPE_FIELDS, *limits.LIMIT_FIELDS}  # fmt: skip


CU_OR_NULL = ("lending_limit_cu", "spillover_budget_cu")


def _limit_defaults(ent: Entitlement, given: set[str]) -> None:
    """`burst` defaults to max_rps (whole requests, at least 1) and is cleared with it, unless given."""
    if "burst" in given:
        return
    if ent.max_rps is None:
        ent.burst = None
    elif ent.burst is None:
        ent.burst = max(1, math.ceil(ent.max_rps))


@transaction.atomic
def entitlement_amend(*, actor: Any, reason: str, entitlement: Entitlement, **changes: Any) -> Entitlement:
    unknown = set(changes) - AMENDABLE
    if unknown:
        name = sorted(unknown)[0]
        raise ValidationError({name: "cannot be amended; revoke and grant instead"})
    if not reason:
        raise ValidationError({"reason": "say why the entitlement changes"})
    locked = lock_pools({entitlement.pool_id})
    ent = Entitlement.objects.select_for_update().select_related("traffic_class").get(pk=entitlement.pk)
    if ent.revoked_at is not None:
        raise ValidationError({"entitlement": "a revoked entitlement cannot be amended"})
    check_amend(ent, changes)  # docs/contract.md §10: not below a commitment before it ends
    for k, v in changes.items():
        setattr(ent, k, as_cu(v) if k in ("cu", "borrowing_limit_cu") or k in CU_OR_NULL and v is not None else v)
    _limit_defaults(ent, set(changes))
    _validate_window(ent.starts_at, ent.ends_at)
    _validate_borrowing(ent.traffic_class_id, ent.overage, ent.borrowing_limit_cu)
    if ent.traffic_class.counts_as_sold:
        check_headroom(locked[ent.pool_id], Window(ent.starts_at, ent.ends_at), ent.cu, exclude_pk=ent.pk)
    ent.version += 1
    ent.full_clean()
    with history_context(actor=actor, reason=reason):
        ent.save()
    return ent


def scope_pool_id(*, tenant: Any, project: Any, model: ServedModel, region: Region, traffic_class: str) -> int | None:
    """The pool an admission scope lives in: where its live (not revoked) entitlements are."""
    qs = scope_entitlements(tenant=tenant, project=project, model=model, region=region, traffic_class=traffic_class)
    return qs.values_list("pool_id", flat=True).order_by("pk").first()


def _scope_label(tenant: Any, project: Any, model: ServedModel, region: Region, traffic_class: str) -> str:
    proj = project.slug if project is not None else "-"
    return f"scope {tenant.slug}/{proj}/{model.slug}/{region.slug}/{traffic_class}"


@transaction.atomic
def scope_move(
    *, actor: Any, reason: str, tenant: Any, project: Any, traffic_class: str, to_pool: Pool
) -> list[Entitlement]:
    """Move a whole admission scope (every live entitlement of it) to `to_pool`, which must serve
    the same model and region and have room, from now on, for what the scope holds there."""
    if not reason:
        raise ValidationError({"reason": "say why the scope moves"})
    model, region = to_pool.model, to_pool.region
    label = _scope_label(tenant, project, model, region, traffic_class)
    serving = set(Pool.objects.filter(model=model, region=region).values_list("pk", flat=True))
    locked = lock_pools(serving)
    qs = scope_entitlements(tenant=tenant, project=project, model=model, region=region, traffic_class=traffic_class)
    moving = list(qs.select_for_update().select_related("traffic_class").order_by("pk"))
    if not moving:
        raise ValidationError({"traffic_class": f"{label} has no live entitlements to move"})
    target = locked[to_pool.pk]
    if all(e.pool_id == target.pk for e in moving):
        return moving
    now = timezone.now()
    if moving[0].traffic_class.counts_as_sold:
        window = Window(now, None)
        held = pool_sold_peak(target, window)
        rows = [
            *Entitlement.objects.filter(pool=target, traffic_class__counts_as_sold=True, revoked_at__isnull=True)
            .exclude(pk__in=[e.pk for e in moving])
            .values_list("starts_at", "ends_at", "cu"),
            *((e.starts_at, e.ends_at, e.cu) for e in moving),
        ]
        peak = peak_sold(rows, window)
        deliverable = target.deliverable_cu
        if peak > deliverable:
            raise ScopePoolConflict(
                {
                    "pool": f"pool {target.slug} delivers {deliverable} CU and has sold up to {held} CU; "
                    f"{label} would take it to {peak} CU"
                }
            )
    with history_context(actor=actor, reason=reason):
        Entitlement.objects.filter(pk__in=[e.pk for e in moving]).update(
            pool=target, version=F("version") + 1, updated_at=now
        )
    return list(Entitlement.objects.filter(pk__in=[e.pk for e in moving]).order_by("pk"))


@transaction.atomic
def entitlement_revoke(*, actor: Any, reason: str, entitlement: Entitlement, at: datetime | None = None) -> Entitlement:
    if not reason:
        raise ValidationError({"reason": "say why the entitlement is revoked"})
    ent = Entitlement.objects.select_for_update().get(pk=entitlement.pk)
    if ent.revoked_at is not None:
        return ent
    ent.revoked_at = at or timezone.now()
    ent.version += 1
    with history_context(actor=actor, reason=reason):
        ent.save(update_fields=["revoked_at", "version", "updated_at"])
    return ent


@transaction.atomic
def reserve_set(
    *,
    host_pool: Pool,
    cu: Decimal | float | str,
    protected_pool: Pool | None = None,
    protected_zone: Any = None,
    note: str = "",
) -> FailoverReserve | None:
    """Create, resize or (cu = 0) remove the reserve `host_pool` holds for one pool, or for one
    pool's replicas in `protected_zone` (a zone alone names the pool when only one fits).

    Refused when the pool serves another model, when a zone reserve would need host replicas in
    the zone it protects, or when the host's deliverable would fall below what it has sold.
    """
    cu_d = as_cu(cu)
    if cu_d < 0:
        raise ValidationError({"cu": "must be ≥ 0"})
    protected_pool = reserve_rules.resolve_protected_pool(host_pool, protected_pool, protected_zone)
    locked = lock_pools({host_pool.pk, protected_pool.pk})
    host = pool_refresh(locked[host_pool.pk])
    scope = {"protected_pool": protected_pool, "protected_zone": protected_zone}
    existing = FailoverReserve.objects.filter(host_pool=host, **scope).first()
    if protected_zone is not None and cu_d > 0:
        reserve_rules.check_zone_room(host, protected_zone, replacing=existing, adding=cu_d)
    delta = cu_d - (existing.cu if existing else Decimal(0))
    new_held = host.reserve_held_cu + delta
    if new_held > host.physical_cu:
        raise ValidationError(
            {"cu": f"pool {host.slug} would hold {new_held} CU of reserves but has only {host.physical_cu} CU physical"}
        )
    if delta > 0:
        host.reserve_held_cu = new_held
        deliverable = host.deliverable_cu
        peak = pool_sold_peak(host, Window(timezone.now(), None))
        if peak > deliverable:
            raise OversellError(
                {
                    "cu": f"pool {host.slug} has sold {peak} CU; a {cu_d} CU reserve would leave "
                    f"only {deliverable} CU deliverable"
                }
            )
    if cu_d == 0:
        if existing:
            existing.delete()
        pool_refresh(host)
        return None
    if existing:
        existing.cu = cu_d
        existing.note = note or existing.note
        existing.save(update_fields=["cu", "note"])
        res = existing
    else:
        res = FailoverReserve(host_pool=host, cu=cu_d, note=note, **scope)
        res.full_clean()
        res.save()
    pool_refresh(host)
    return res
