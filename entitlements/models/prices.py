"""The price list (docs/contract.md §10): what one accelerator-hour costs in one region under one commitment
term, from a date, with where the figure comes from; and its audit, one row per change with who and why.

A pool's fully loaded $ per CU-hour reads its accelerator's row for the pool's region and term
(entitlements.cu_hour_rate), so the cost page, the statement, planning, quotes and charges price from here.
Rows change only through entitlements.prices (price_save, price_delete), which writes the audit row in the
same transaction; the admin requires a reason.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from entitlements.models.catalogue import Accelerator, Region


class Term(models.TextChoices):
    ON_DEMAND = "on_demand", "on demand"
    ONE_MONTH = "1_month", "1 month"
    SIX_MONTH = "6_month", "6 months"
    ONE_YEAR = "1_year", "1 year"
    THREE_YEAR = "3_year", "3 years"


# How many calendar months each term commits to (on demand: none).
TERM_MONTHS = {"on_demand": 0, "1_month": 1, "6_month": 6, "1_year": 12, "3_year": 36}
MAX_USD_PER_ACCELERATOR_HOUR = 10_000


def validate_term(value: str) -> None:
    if value not in TERM_MONTHS:
        raise ValidationError(f"unknown term '{str(value)[:32]}': one of {', '.join(TERM_MONTHS)}")


class Price(models.Model):
    accelerator = models.ForeignKey(Accelerator, on_delete=models.PROTECT, related_name="prices")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="prices")
    term = models.CharField(max_length=12, choices=Term.choices, validators=[validate_term])
    usd_per_accelerator_hour = models.DecimalField(max_digits=12, decimal_places=4)
    effective_from = models.DateField()
    source = models.TextField(
        help_text="where the figure comes from: a list price page and the date read, or how it is derived"
    )

    class Meta:
        ordering = ["accelerator__slug", "region__slug", "effective_from", "term"]
        constraints = [
            models.UniqueConstraint(fields=["accelerator", "region", "term", "effective_from"], name="price_one_row"),
            models.CheckConstraint(
                condition=Q(usd_per_accelerator_hour__gte=0)
                & Q(usd_per_accelerator_hour__lte=MAX_USD_PER_ACCELERATOR_HOUR),
                name="price_usd_in_range",
            ),
            models.CheckConstraint(
                condition=Q(term__in=list(TERM_MONTHS)),
                name="price_term_known",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.accelerator_id}/{self.region_id}/{self.term} from {self.effective_from}"

    def clean(self) -> None:
        usd = self.usd_per_accelerator_hour
        if usd is not None and not 0 <= usd <= MAX_USD_PER_ACCELERATOR_HOUR:
            raise ValidationError(
                {"usd_per_accelerator_hour": f"must be between 0 and {MAX_USD_PER_ACCELERATOR_HOUR:,} USD per hour"}
            )


class PriceChange(models.Model):
    """Append-only: written by entitlements.prices with the price row's change; never edited."""

    price_id = models.BigIntegerField(db_index=True)
    op = models.CharField(max_length=8)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, null=True, db_constraint=False, related_name="+"
    )
    reason = models.TextField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.op} price {self.price_id}"
