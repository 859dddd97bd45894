"""The price list's reads and writes (docs/contract.md §10).

`price_for` is the one lookup every $ figure starts from: the row of an accelerator in a region for a term
in force on a date (the latest `effective_from` on or before it). Writes go through `price_save` and
`price_delete`, which keep the audit (entitlements.models.PriceChange: who, why, before and after) in the
same transaction as the change, so no edit of a price is unexplained.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from entitlements.models import Price, PriceChange
from entitlements.models.prices import TERM_MONTHS

REASON_MAX = 500


# Inside `prices_read_once`: the rows in force on its date, (accelerator, region, term) -> row.
_IN_FORCE: ContextVar[tuple[date, dict[tuple[int, int, str], Price]] | None] = ContextVar(
    "prices_in_force", default=None
)


@contextmanager
def prices_read_once() -> Iterator[None]:
    """Within it, `price_for` for today reads the list once (one query for every row in force), not once
    per pool and call: a page that prices every pool several times (the gap, the cost report) stays at a
    bounded number of queries. Nested uses share the outer read."""
    if _IN_FORCE.get() is not None:
        yield
        return
    today = timezone.now().date()
    rows: dict[tuple[int, int, str], Price] = {}
    for row in Price.objects.filter(effective_from__lte=today).order_by("effective_from"):
        rows[(row.accelerator_id, row.region_id, row.term)] = row  # the latest effective_from wins
    token = _IN_FORCE.set((today, rows))
    try:
        yield
    finally:
        _IN_FORCE.reset(token)


def price_for(accelerator_id: int, region_id: int, term: str, on: date | None = None) -> Price | None:
    on = on or timezone.now().date()
    read = _IN_FORCE.get()
    if read is not None and read[0] == on:
        return read[1].get((accelerator_id, region_id, term))
    return (
        Price.objects.filter(accelerator_id=accelerator_id, region_id=region_id, term=term, effective_from__lte=on)
        .order_by("-effective_from")
        .first()
    )


def terms_priced(accelerator_id: int, region_id: int, on: date | None = None) -> dict[str, Price]:
    """Every term the list prices for this accelerator and region on a date, in TERM_MONTHS order."""
    found = {t: price_for(accelerator_id, region_id, t, on) for t in TERM_MONTHS}
    return {t: p for t, p in found.items() if p is not None}


def _snapshot(p: Price) -> dict[str, Any]:
    return {
        "accelerator": p.accelerator.slug,
        "region": p.region.slug,
        "term": p.term,
        "usd_per_accelerator_hour": str(p.usd_per_accelerator_hour),
        "effective_from": p.effective_from.isoformat(),
        "source": p.source,
    }


def _reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError({"reason": "say why the price changes"})
    return reason[:REASON_MAX]


def _check_against_on_demand(price: Price) -> None:
    """No commitment may cost more per hour than on demand for the same accelerator and region on the same
    date (a quote would then tell a tenant to pay more for less freedom)."""
    same = {"accelerator_id": price.accelerator_id, "region_id": price.region_id}
    if price.term == "on_demand":
        rows = Price.objects.filter(**same, effective_from=price.effective_from).exclude(term="on_demand")
        dearer = rows.filter(usd_per_accelerator_hour__gt=price.usd_per_accelerator_hour).first()
        if dearer is not None:
            raise ValidationError(
                {"usd_per_accelerator_hour": f"below the {dearer.term} row (${dearer.usd_per_accelerator_hour}/h)"}
            )
        return
    od = price_for(price.accelerator_id, price.region_id, "on_demand", price.effective_from)
    if od is not None and price.usd_per_accelerator_hour > od.usd_per_accelerator_hour:
        raise ValidationError(
            {"usd_per_accelerator_hour": f"above on demand (${od.usd_per_accelerator_hour}/h): a commitment costs less"}
        )


@transaction.atomic
def price_save(*, actor: Any, reason: str, price: Price) -> Price:
    """Validated whole (a negative price, an unknown term: errors naming the field), then saved with its audit row."""
    why = _reason(reason)
    if isinstance(price.usd_per_accelerator_hour, float | int | str):
        price.usd_per_accelerator_hour = Decimal(str(price.usd_per_accelerator_hour))
    price.full_clean()
    _check_against_on_demand(price)
    before = None
    if price.pk:
        old = Price.objects.select_related("accelerator", "region").filter(pk=price.pk).first()
        before = _snapshot(old) if old else None
    price.save()
    price.refresh_from_db()
    op = "update" if before else "insert"
    PriceChange.objects.create(price_id=price.pk, op=op, before=before, after=_snapshot(price), actor=actor, reason=why)
    return price


@transaction.atomic
def price_delete(*, actor: Any, reason: str, price: Price) -> None:
    why = _reason(reason)
    before = _snapshot(price)
    pk = price.pk
    price.delete()
    PriceChange.objects.create(price_id=pk, op="delete", before=before, after=None, actor=actor, reason=why)
