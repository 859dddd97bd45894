"""Default alert rules for the demo (`manage.py load_demo_alerts`, run by `make run` after
load_demo). Keyed on name: loading twice changes nothing."""

from __future__ import annotations

from typing import Any

from alerts.models import AlertRule
from entitlements.models import Pool, Tenant

# name, scope, tenant slug, pool slug, kind, threshold, window minutes
RULES: list[tuple[str, str, str | None, str | None, str, float, int]] = [
    ("acme: use over 90 % of bought", "tenant", "acme", None, "use_over_bought", 90, 15),
    ("acme: own throttles over 5 %", "tenant", "acme", None, "tenant_throttles_over", 5, 15),
    ("acme: latency misses", "tenant", "acme", None, "latency_misses", 0, 15),
    ("acme: envelope drift", "tenant", "acme", None, "envelope_drift", 150, 60),
    ("globex: own throttles over 5 %", "tenant", "globex", None, "tenant_throttles_over", 5, 15),
    ("H200 pool: platform throttles", "pool", None, "llama-2-70b-us-east-h200", "platform_throttles", 0, 15),
    ("Platform: order-by date within 30 days", "platform", None, None, "supply_gap_order_by_within", 30, 15),
    ("Platform: a forecast run failed", "platform", None, None, "forecast_run_failed", 0, 15),
]


def load_demo_rules() -> list[str]:
    out = []
    for name, scope, tenant, pool, kind, threshold, window in RULES:
        fields: dict[str, Any] = {
            "scope": scope,
            "tenant": Tenant.objects.filter(slug=tenant).first() if tenant else None,
            "pool": Pool.objects.filter(slug=pool).first() if pool else None,
            "kind": kind,
            "threshold": threshold,
            "window_minutes": window,
            # the demo has no mail server and no receivers: inbox only
            "channels": [],
        }
        if (tenant and fields["tenant"] is None) or (pool and fields["pool"] is None):
            out.append(f"skipped rule {name!r}: run load_demo first")
            continue
        _, created = AlertRule.objects.get_or_create(name=name, defaults=fields)
        out.append(f"{'created' if created else 'kept'} rule {name!r}")
    return out
