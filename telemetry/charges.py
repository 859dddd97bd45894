"""Charges for a month (docs/contract.md §10): one row per tenant × project × model × region × class with
`{cu_hours_bought, cu_hours_used, usd_committed, usd_on_demand, usd_total}`, for a billing system.

Each entitlement live in the month is charged exactly what its statement for that month says (telemetry.statement:
bought CU-hours, settled ones for a borrowing class, at the pool's $ per CU-hour for the entitlement's term), so
a month's total is the sum of its statements to the cent. Dollars go to `usd_committed` when the entitlement
carries a commitment term, else to `usd_on_demand`. Used CU-hours are the scope's (one admission scope, one
usage): two entitlements of one scope in a month share them, so the row takes them once.

Who sees what (docs/contract.md §10, exactly): operators every tenant, optionally one (`tenant`); a tenant member
(viewer, requester) their own tenant only, and another tenant named is a 404 (ChargesNotFound), as for every tenant
object. Nobody else: an approver (platform, not finance) is refused with ChargesForbidden (a 403), as a tenant
member is on a platform route.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.db.models import Q
from django.utils import timezone

from capacity.quotes import add_months
from entitlements import roles
from entitlements.models import Entitlement
from telemetry.statement import statement

PERIOD = re.compile(r"^(\d{4})-(\d{2})$")
EARLIEST_YEAR = 2000
MONTHS_AHEAD = 12  # a month further ahead than this has nothing to charge and is refused
CENT = Decimal("0.01")
KEY = ("tenant", "project", "model", "region", "traffic_class")


class PeriodInvalid(ValueError):
    field = "period"


class ChargesNotFound(LookupError):
    pass


class ChargesForbidden(PermissionError):
    """Neither an operator nor a tenant member (an approver): no charges at all, a 403."""


@dataclass(frozen=True)
class Month:
    label: str
    start: datetime
    end: datetime

    def weeks(self) -> list[tuple[datetime, datetime]]:
        """Monday-to-Monday weeks clipped to the month (the first and last may be short)."""
        out, at = [], self.start
        while at < self.end:
            nxt = min(self.end, (at + timedelta(days=7 - at.weekday())).replace(hour=0, minute=0))
            out.append((at, nxt))
            at = nxt
        return out


def parse_period(raw: Any, now: datetime | None = None) -> Month:
    """`YYYY-MM` in UTC; malformed, before 2000 or more than a year ahead → PeriodInvalid (a 400 naming `period`)."""
    now = now or timezone.now()
    m = PERIOD.match(raw) if isinstance(raw, str) else None
    if m is None:
        raise PeriodInvalid("expected a month as YYYY-MM, e.g. 2026-11")
    year, month = int(m.group(1)), int(m.group(2))
    if not 1 <= month <= 12:
        raise PeriodInvalid("the month must be 01 to 12")
    latest = add_months(now.replace(day=1), MONTHS_AHEAD)
    if year < EARLIEST_YEAR or (year, month) > (latest.year, latest.month):
        raise PeriodInvalid(f"a month from {EARLIEST_YEAR}-01 to {latest.year}-{latest.month:02d}")
    start = datetime(year, month, 1, tzinfo=UTC)
    return Month(f"{year}-{month:02d}", start, add_months(start, 1))


def check_may_read(user: Any) -> None:
    """ChargesForbidden unless an operator or a tenant member; the views call it before reading the period, so
    an approver is told 403 whatever they ask."""
    r = roles.roles_of(user)
    if roles.OPERATOR not in r and (roles.tenant_of(user) is None or not r & {roles.VIEWER, roles.REQUESTER}):
        raise ChargesForbidden("charges are for operators and tenant members")


def visible_entitlements(user: Any, tenant: str | None, month: Month) -> list[Entitlement]:
    check_may_read(user)
    r = roles.roles_of(user)
    qs = Entitlement.objects.select_related(
        "tenant", "project", "model", "region", "pool__accelerator", "traffic_class"
    )
    if roles.OPERATOR in r:
        if tenant:
            qs = qs.filter(tenant__slug=tenant)
    else:
        own = roles.tenant_of(user)
        if tenant and tenant != own.slug:
            raise ChargesNotFound("no such tenant")
        qs = qs.filter(tenant=own)
    live = Q(starts_at__lt=month.end) & (Q(ends_at__isnull=True) | Q(ends_at__gt=month.start))
    live &= Q(revoked_at__isnull=True) | Q(revoked_at__gt=month.start)
    return list(qs.filter(live).order_by("tenant__slug", "pk"))


def _key(ent: Entitlement) -> tuple[str, ...]:
    return (
        ent.tenant.slug,
        ent.project.slug if ent.project else "",
        ent.model.slug,
        ent.region.slug,
        ent.traffic_class_id,
    )


def _usd(value: Any) -> Decimal:
    return Decimal(str(value or 0)).quantize(CENT, rounding=ROUND_HALF_UP)


def charges(user: Any, month: Month, tenant: str | None = None) -> dict[str, Any]:
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    statements = []
    for ent in visible_entitlements(user, tenant, month):
        st = statement(ent, month.start, month.end)
        statements.append({"entitlement": str(ent.uuid), "usd": st["cost"]["usd"], "term": ent.term})
        k = _key(ent)
        row = rows.setdefault(
            k,
            {
                **dict(zip(KEY, k, strict=True)),
                "cu_hours_bought": 0.0,
                "cu_hours_used": 0.0,
                "usd_committed": Decimal(0),
                "usd_on_demand": Decimal(0),
                "usd_total": Decimal(0),
                "terms": set(),
                "entitlements": [],
            },
        )
        usd = _usd(st["cost"]["usd"])
        row["cu_hours_bought"] += st["bought"]["cu_hours"]
        row["cu_hours_used"] = max(row["cu_hours_used"], st["used"]["cu_hours"])  # the scope's, once
        row["usd_on_demand" if ent.term == "on_demand" else "usd_committed"] += usd
        row["usd_total"] += usd
        row["terms"].add(ent.term)
        row["entitlements"].append(str(ent.uuid))
    out = [_finish(r) for r in rows.values()]
    total = sum((Decimal(r["usd_total"]) for r in out), Decimal(0))
    by_tenant: dict[str, Decimal] = defaultdict(Decimal)
    for r in out:
        by_tenant[r["tenant"]] += Decimal(r["usd_total"])
    return {
        "period": month.label,
        "start": month.start.isoformat(),
        "end": month.end.isoformat(),
        "currency": "USD",
        "rows": out,
        "totals": {
            "usd_total": str(total.quantize(CENT)),
            "by_tenant": {t: str(v.quantize(CENT)) for t, v in sorted(by_tenant.items())},
        },
        "basis": "each entitlement's statement for the month (docs/contract.md §8, §10): bought CU-hours (settled "
        "for best effort) × the pool's $ per CU-hour at the entitlement's term",
    }


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "cu_hours_bought": round(row["cu_hours_bought"], 6),
        "cu_hours_used": round(row["cu_hours_used"], 6),
        "usd_committed": str(row["usd_committed"].quantize(CENT)),
        "usd_on_demand": str(row["usd_on_demand"].quantize(CENT)),
        "usd_total": str(row["usd_total"].quantize(CENT)),
        "terms": sorted(row["terms"]),
    }


def weekly_by_tenant(user: Any, month: Month, tenant: str | None = None) -> dict[str, list[float]]:
    """Per tenant, the $ of each week of the month (the finance page's chart): each week's statements."""
    weeks = month.weeks()
    out: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(weeks))
    for ent in visible_entitlements(user, tenant, month):
        for i, (a, b) in enumerate(weeks):
            out[ent.tenant.slug][i] += float(_usd(statement(ent, a, b)["cost"]["usd"]))
    return dict(out)
