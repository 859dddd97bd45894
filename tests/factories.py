"""factory_boy factories and a small fleet builder shared by the suite."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from entitlements import models as m
from entitlements.pool_locks import pool_refresh
from entitlements.services import Envelope

User = get_user_model()


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("demo")


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Tenant
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"tenant{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())


class ServedModelFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.ServedModel
        django_get_or_create = ("slug",)

    slug = "llama-test"
    name = "Llama test"
    r_wt_per_s = 1000.0
    kv_bytes_per_token = 327_680
    context_length = 16384  # room for the shared test envelope (8,000 + 2,000)
    weights_gb = 140.0


class RegionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Region
        django_get_or_create = ("slug",)

    slug = "us-test"
    name = "US test"


class ZoneFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Zone
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"us-test-{n}")
    region = factory.SubFactory(RegionFactory)


class AcceleratorFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = m.Accelerator
        django_get_or_create = ("slug",)

    slug = "h100-test"
    name = "H100 test"
    kind = "gpu"
    memory_gb = 80.0


class OperatingPointFactory(factory.django.DjangoModelFactory):
    """10,000 out tok/s on mix 300/100, w_out 4, R 1000 → (4 + 3) × 10 = 70 CU per replica."""

    class Meta:
        model = m.OperatingPoint

    model = factory.SubFactory(ServedModelFactory)
    accelerator = factory.SubFactory(AcceleratorFactory)
    accelerators_per_replica = 8
    runtime = factory.Sequence(lambda n: f"runtime {n}")
    scenario = "Server"
    ttft_p99_limit_ms = 2000.0
    tpot_p99_limit_ms = 200.0
    out_tps_per_replica = 10_000.0
    ref_mean_prompt = 300.0
    ref_mean_output = 100.0
    ref_mix_source = "test mix"
    source = "https://example.org/op"


def make_pool(
    slug: str,
    *,
    replicas_per_zone: tuple[int, ...] = (2, 2),
    op: Any = None,
    region: Any = None,
    maintenance_pct: float = 0,
    safety_pct: float = 0,
    fragmentation_pct: float = 0,
) -> m.Pool:
    op = op or OperatingPointFactory()
    region = region or RegionFactory()
    pool = m.Pool.objects.create(
        slug=slug,
        model=op.model,
        region=region,
        accelerator=op.accelerator,
        operating_point=op,
        accelerators_per_replica=op.accelerators_per_replica,
        maintenance_pct=maintenance_pct,
        safety_pct=safety_pct,
        fragmentation_pct=fragmentation_pct,
    )
    for i, n in enumerate(replicas_per_zone):
        zone, _ = m.Zone.objects.get_or_create(slug=f"{region.slug}-{chr(97 + i)}", defaults={"region": region})
        m.PoolZone.objects.create(pool=pool, zone=zone, replicas=n)
    return pool_refresh(pool)


ENVELOPE = Envelope(
    max_prompt_tokens=8000,
    max_output_tokens=2000,
    prompt_p50=1000,
    prompt_p95=4000,
    output_p50=200,
    output_p95=800,
    max_concurrency=64,
    ttft_p99_ms=2000,
    tpot_p99_ms=200,
)


def grant_kwargs(
    pool: m.Pool,
    tenant: m.Tenant,
    cu: Decimal | str | float,
    *,
    traffic_class: str = "reserved",
    start: Any = None,
    days: int | None = 30,
) -> dict[str, Any]:
    start = start or timezone.now() - timedelta(hours=1)
    return {
        "tenant": tenant,
        "model": pool.model,
        "region": pool.region,
        "pool": pool,
        "traffic_class": traffic_class,
        "cu": cu,
        "starts_at": start,
        "ends_at": start + timedelta(days=days) if days else None,
        "envelope": ENVELOPE,
    }


@dataclass
class Fleet:
    pool_a: m.Pool
    pool_b: m.Pool
    acme: m.Tenant
    globex: m.Tenant
    operator: Any


def build_fleet() -> Fleet:
    """Pool A: 4 replicas × 70 CU = 280 CU physical. Pool B: same, 280 CU. No deductions."""
    op = OperatingPointFactory()
    a = make_pool("pool-a", op=op)
    b = make_pool("pool-b", op=op)
    operator = UserFactory(username="op")
    m.PlatformRole.objects.get_or_create(user=operator, role="operator")
    return Fleet(a, b, TenantFactory(slug="acme"), TenantFactory(slug="globex"), operator)


def member(username: str, tenant: m.Tenant, role: str) -> Any:
    """A person in one tenant: role `viewer` or `requester`."""
    user = UserFactory(username=username, email=f"{username}@example.org")
    m.Membership.objects.create(user=user, tenant=tenant, role=role)
    return user


def platform_user(username: str, *roles: str) -> Any:
    """A platform person: `approver`, `operator` and/or `gateway`."""
    user = UserFactory(username=username, email=f"{username}@example.org")
    for role in roles:
        m.PlatformRole.objects.create(user=user, role=role)
    return user
