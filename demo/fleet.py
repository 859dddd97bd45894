"""The demo fleet loaded (its data: demo/fleet_data.py): catalogue from the published operating points,
pools over three regions, failover reserves, four tenants with entitlements in every traffic class,
and the demo logins.

Idempotent: every row is keyed on slugs (or, for entitlements, on tenant × project × pool × class),
so loading twice changes nothing and writes no second history row. Entitlement amounts are shares
of each pool's deliverable capacity, so the fleet stays oversell-free whatever the measured numbers.
"""

from __future__ import annotations

import math
from datetime import datetime, time, timedelta
from decimal import ROUND_FLOOR, Decimal
from types import SimpleNamespace
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.utils import timezone

from demo.fleet_data import (
    ACCELERATOR_COSTS,
    ACTOR,
    CLOUD_OVERHEADS,
    ENVELOPES,
    GRANTS,
    MODELS,
    OWNED_OVERHEADS,
    PASSWORD,
    POOL_TERMS,
    POOLS,
    REGIONS,
    RESERVES,
    TENANTS,
    USERS,
    GrantSpec,
    PoolSpec,
)
from demo.loaders import OperatingPointRow, load_operating_points
from demo.prices import load_prices
from entitlements import pool_locks, services
from entitlements.commitments import commitment_end
from entitlements.compute_specs import load_compute_specs
from entitlements.concurrency import derive_max_concurrency
from entitlements.models import (
    Accelerator,
    Entitlement,
    Membership,
    OperatingPoint,
    PlatformRole,
    Pool,
    PoolZone,
    Price,
    Project,
    Region,
    ServedModel,
    Tenant,
    Zone,
)


def _pick_op(spec: PoolSpec, model: ServedModel, acc: Accelerator) -> OperatingPoint:
    ops = OperatingPoint.objects.filter(
        model=model,
        accelerator=acc,
        accelerators_per_replica=spec.per_replica,
        scenario__startswith=spec.scenario,
        runtime__contains=spec.runtime,
    ).order_by("is_ceiling", "-out_tps_per_replica", "pk")
    op = ops.first()
    if op is None:
        raise LookupError(f"no operating point for pool {spec.slug}")
    return op


def _load_catalogue(rows: list[OperatingPointRow]) -> None:
    for slug, m in MODELS.items():
        ServedModel.objects.update_or_create(
            slug=slug,
            defaults={
                "name": m.name,
                "w_out": 4.0,
                "w_cached": 0.0,
                "r_wt_per_s": m.r_wt_per_s,
                "kv_bytes_per_token": m.kv_bytes_per_token,
                "context_length": m.context_length,
                "weights_gb": m.weights_gb,
            },
        )
    for row in rows:
        spec = row.accelerator
        price, watts, od, rsv, lead = ACCELERATOR_COSTS[spec.slug]
        Accelerator.objects.update_or_create(
            slug=spec.slug,
            defaults={
                "name": spec.name,
                "kind": spec.kind,
                "memory_gb": spec.memory_gb,
                "chips_per_slice": spec.chips_per_slice,
                "purchase_price_usd": price,
                "power_watts": watts,
                "cloud_on_demand_per_hour": od,
                "cloud_reserved_per_hour": rsv,
                "lead_time_weeks": lead,
                **(OWNED_OVERHEADS if price > 0 else CLOUD_OVERHEADS),
            },
        )
    models = {m.slug: m for m in ServedModel.objects.all()}
    accs = {a.slug: a for a in Accelerator.objects.all()}
    for row in rows:
        OperatingPoint.objects.update_or_create(
            model=models[row.model],
            accelerator=accs[row.accelerator.slug],
            accelerators_per_replica=row.accelerators_per_replica,
            runtime=row.runtime,
            scenario=row.scenario,
            defaults={
                "ttft_p99_limit_ms": row.ttft_p99_limit_ms,
                "tpot_p99_limit_ms": row.tpot_p99_limit_ms,
                "measured_ttft_p99_ms": row.measured_ttft_p99_ms,
                "measured_tpot_p99_ms": row.measured_tpot_p99_ms,
                "out_tps_per_replica": row.out_tps_per_replica,
                "ref_mean_prompt": row.ref_mean_prompt,
                "ref_mean_output": row.ref_mean_output,
                "ref_mix_source": row.ref_mix_source,
                "is_ceiling": row.is_ceiling,
                "source": row.source,
                "notes": row.notes,
            },
        )


def _load_regions() -> None:
    for slug, name in REGIONS.items():
        region, _ = Region.objects.update_or_create(slug=slug, defaults={"name": name})
        for letter in "abc":
            Zone.objects.update_or_create(slug=f"{slug}-{letter}", defaults={"region": region})


def _load_pools() -> None:
    for spec in POOLS:
        model = ServedModel.objects.get(slug=spec.model)
        acc = Accelerator.objects.get(slug=spec.accelerator)
        pool, _ = Pool.objects.update_or_create(
            slug=spec.slug,
            defaults={
                "model": model,
                "region": Region.objects.get(slug=spec.region),
                "accelerator": acc,
                "operating_point": _pick_op(spec, model, acc),
                "accelerators_per_replica": spec.per_replica,
                "maintenance_pct": spec.maintenance_pct,
                "safety_pct": spec.safety_pct,
                "fragmentation_pct": spec.fragmentation_pct,
                "failure_policy": spec.failure_policy,
                "term": POOL_TERMS.get(spec.slug, "on_demand"),
            },
        )
        for letter, n in zip("abc", spec.replicas, strict=False):
            PoolZone.objects.update_or_create(
                pool=pool, zone=Zone.objects.get(slug=f"{spec.region}-{letter}"), defaults={"replicas": n}
            )
        with transaction.atomic():
            pool_locks.lock_pools({pool.pk})
            pool_locks.pool_refresh(pool)
    for host, protected_pool, protected_zone, cu, note in RESERVES:
        services.reserve_set(
            host_pool=Pool.objects.get(slug=host),
            protected_pool=Pool.objects.get(slug=protected_pool),
            protected_zone=Zone.objects.get(slug=protected_zone) if protected_zone else None,
            cu=cu,
            note=note,
        )


def _load_people() -> dict[str, Any]:
    User = get_user_model()
    for slug, (name, projects) in TENANTS.items():
        tenant, _ = Tenant.objects.update_or_create(slug=slug, defaults={"name": name})
        for p in projects:
            Project.objects.update_or_create(tenant=tenant, slug=p, defaults={"name": p.replace("-", " ").title()})
    users = {}
    for username, platform_role, membership, is_staff in USERS:
        user, created = User.objects.get_or_create(username=username, defaults={"is_staff": is_staff})
        if created:
            user.set_password(PASSWORD)
            user.save(update_fields=["password"])
        if platform_role:
            PlatformRole.objects.get_or_create(user=user, role=platform_role)
        if membership:
            Membership.objects.update_or_create(
                user=user, defaults={"tenant": Tenant.objects.get(slug=membership[0]), "role": membership[1]}
            )
        users[username] = user
    # Staff alone sees nothing in the admin: the operator gets the entitlements app's permissions.
    users[ACTOR].user_permissions.add(*Permission.objects.filter(content_type__app_label="entitlements"))
    return users


def _whole_cu(value: float) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.1"), rounding=ROUND_FLOOR)


def _envelope(pool: Pool, cu: Decimal) -> services.Envelope:
    model, op = pool.model, pool.operating_point
    max_p, max_o, p50, p95, o50, o95, _ = ENVELOPES[model.slug]
    # The cap is derived (issue 15.5): Little's law on the envelope's mean request × a burst factor,
    # never above this entitlement's share of the pool's KV memory (entitlements.concurrency).
    shape = SimpleNamespace(
        prompt_p50=p50, prompt_p95=p95, max_prompt_tokens=max_p, output_p50=o50, output_p95=o95, max_output_tokens=max_o
    )
    conc = derive_max_concurrency(pool=pool, cu=float(cu), envelope=shape).value
    return services.Envelope(
        max_prompt_tokens=max_p,
        max_output_tokens=max_o,
        prompt_p50=p50,
        prompt_p95=p95,
        output_p50=o50,
        output_p95=o95,
        max_concurrency=conc,
        # The promise's latency is the one the pool's operating point was measured under.
        ttft_p99_ms=math.ceil(op.ttft_p99_limit_ms or 2000),
        tpot_p99_ms=math.ceil(op.tpot_p99_limit_ms or 200),
    )


def _spill_target(g: GrantSpec, tenant: Tenant) -> Entitlement | None:
    # GRANTS lists a target before the grant that spills to it, so it exists by now.
    if g.spill_to is None:
        return None
    project, pool, cls = g.spill_to
    of_project = {"project__slug": project} if project else {"project__isnull": True}
    return Entitlement.objects.get(
        tenant=tenant, pool__slug=pool, traffic_class__slug=cls, revoked_at__isnull=True, **of_project
    )


def _load_grants(actor: Any) -> int:
    day0 = datetime.combine(timezone.now().date(), time.min, tzinfo=timezone.get_current_timezone())
    created = 0
    for g in GRANTS:
        pool = Pool.objects.select_related("model", "region", "operating_point__model").get(slug=g.pool)
        tenant = Tenant.objects.get(slug=g.tenant)
        project = Project.objects.get(tenant=tenant, slug=g.project) if g.project else None
        key = {"tenant": tenant, "project": project, "pool": pool, "traffic_class_id": g.traffic_class}
        if Entitlement.objects.filter(**key).exists():
            continue
        b = pool.breakdown()
        base = b.physical if g.traffic_class == "best_effort" else b.deliverable
        cu = _whole_cu(base * g.share)
        starts = day0 + timedelta(days=g.starts_in_days)
        ends = starts + timedelta(days=g.ends_after_days) if g.ends_after_days else None
        services.entitlement_grant(
            actor=actor,
            reason=f"demo fleet: {g.tenant} {g.traffic_class.replace('_', ' ')} on {pool.slug}",
            tenant=tenant,
            project=project,
            model=pool.model,
            region=pool.region,
            pool=pool,
            traffic_class=g.traffic_class,
            cu=cu,
            starts_at=starts,
            ends_at=ends,
            envelope=_envelope(pool, cu),
            term=g.term,
            committed_until=commitment_end(g.term, starts, ends),
            overage=g.overage,
            borrowing_limit_cu=_whole_cu(float(cu) * g.borrow_share),
            lending_limit_cu=None if g.lending_share is None else _whole_cu(float(cu) * g.lending_share),
            weight=g.weight,
            spillover_target=_spill_target(g, tenant),
            spillover_budget_cu=g.spill_budget_cu,
        )
        created += 1
    return created


@transaction.atomic
def load_demo() -> list[str]:
    """Load (or re-load, changing nothing) the demo fleet; returns summary lines."""
    result = load_operating_points()
    _load_catalogue(result.rows)
    load_compute_specs()  # the prefill bound's figures (issue 15.3)
    _load_regions()
    _load_pools()
    users = _load_people()
    priced = load_prices(actor=users[ACTOR])
    granted = _load_grants(users[ACTOR])
    lines = [
        f"operating points: {len(result.rows)} loaded, {len(result.skipped)} skipped ("
        + "; ".join(f"line {n}: {why}" for n, why in result.skipped)
        + ")",
        f"catalogue: {ServedModel.objects.count()} models, {Accelerator.objects.count()} accelerators, "
        f"{Region.objects.count()} regions, {Zone.objects.count()} zones",
        f"price list: {priced} rows written now, {Price.objects.count()} in total (data/prices.csv)",
        f"entitlements: {granted} granted now, {Entitlement.objects.count()} in total",
        "pools (CU: physical / deliverable / sold now):",
    ]
    from entitlements.selectors import pools_with_totals

    for row in pools_with_totals():
        p = row["pool"]
        lines.append(
            f"  {p.slug:<30} {p.replicas:>2} × {p.cu_per_replica:6.1f} CU  "
            f"{row['physical_cu']:>8.1f} / {row['deliverable_cu']:>8.1f} / {row['sold_cu']:>8.1f}"
        )
    lines.append("logins (password 'demo'): " + ", ".join(u for u, *_ in USERS))
    return lines
