"""The demo's price list: data/prices.csv (public list prices with their sources and the date read; the
commitment terms derived from stated discounts, each row says which) into the price list, through the
audited service, so the demo's prices have an audit row like an operator's edit. Loading twice changes
nothing: a row already at its figure and source is left alone (no second audit row)."""

from __future__ import annotations

import csv
from datetime import date
from decimal import Decimal
from pathlib import Path

from django.conf import settings

from entitlements.models import Accelerator, Price, Region
from entitlements.prices import price_save

PATH = Path(settings.DATA_DIR) / "prices.csv"
REASON = "demo price list (data/prices.csv)"


def load_prices(path: Path = PATH, actor: object = None) -> int:
    """Returns how many rows were written; a row for an accelerator or region the catalogue lacks is skipped."""
    accs = {a.slug: a for a in Accelerator.objects.all()}
    regions = {r.slug: r for r in Region.objects.all()}
    written = 0
    with path.open(newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            acc, region = accs.get(row["accelerator"]), regions.get(row["region"])
            if acc is None or region is None:
                continue
            usd = Decimal(row["usd_per_accelerator_hour"])
            source = f"{row['source']} (read {row['read_on']})"
            key = {"accelerator": acc, "region": region, "term": row["term"]}
            frm = date.fromisoformat(row["effective_from"])
            price = Price.objects.filter(**key, effective_from=frm).first() or Price(**key, effective_from=frm)
            if price.pk and price.usd_per_accelerator_hour == usd and price.source == source:
                continue
            price.usd_per_accelerator_hour, price.source = usd, source
            price_save(actor=actor, reason=REASON, price=price)
            written += 1
    return written
