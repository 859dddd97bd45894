"""Entitlements, traffic classes, reason codes, and the entitlement history.

History rows are written by database triggers (see migration 0002), so bulk `update()`,
`bulk_create()` and raw SQL are captured as well as service calls; who and why come from
`entitlements.history.history_context`.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q

from entitlements import limits
from entitlements.models.catalogue import Region, ServedModel
from entitlements.models.prices import Term, validate_term
from entitlements.models.supply import CU, Pool
from entitlements.models.tenancy import Project, Tenant

# docs/contract.md §5: only best_effort borrows. Named once: the database constraint, the services and
# the snapshot all read it, so what is stored, what is exported and what is enforced agree.
BORROWING_CLASS = "best_effort"
# Issue 36.3 (docs/contract.md §5, "Lending and fair share"): lenders are the guaranteed classes; a lender may
# cap what it lends (lending_limit_cu), a borrower carries a fair-share weight.
LENDING_CLASSES = ("reserved", "shared")
DEFAULT_WEIGHT = 1.0
MAX_WEIGHT = 1000.0


class TrafficClass(models.Model):
    slug = models.SlugField(max_length=16, unique=True)
    name = models.CharField(max_length=40)
    guaranteed = models.BooleanField()
    may_lend = models.BooleanField()
    may_borrow = models.BooleanField()
    counts_as_sold = models.BooleanField()
    shed_order = models.PositiveSmallIntegerField(help_text="shed first = 1")
    description = models.CharField(max_length=300)

    class Meta:
        ordering = ["shed_order"]
        verbose_name_plural = "traffic classes"

    def __str__(self) -> str:
        return self.slug


class ReasonCode(models.Model):
    """docs/contract.md §4: the one set of reasons every throttle carries."""

    code = models.CharField(max_length=32, unique=True)
    responsible = models.CharField(max_length=20)
    when = models.CharField(max_length=200)
    default_retry_after_s = models.PositiveIntegerField()

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.code


class Entitlement(models.Model):
    class Overage(models.TextChoices):
        THROTTLE = "throttle", "Throttle above the entitlement"
        BORROW = "borrow", "Borrow idle capacity, then throttle"

    class Overflow(models.TextChoices):
        ALLOW = "allow", "Spill over when the own bucket is empty"
        DENY = "deny", "Never spill over unless the request asks"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="entitlements")
    project = models.ForeignKey(Project, on_delete=models.PROTECT, null=True, blank=True, related_name="entitlements")
    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, related_name="entitlements")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="entitlements")
    pool = models.ForeignKey(Pool, on_delete=models.PROTECT, related_name="entitlements")
    traffic_class = models.ForeignKey(
        TrafficClass, on_delete=models.PROTECT, to_field="slug", db_column="traffic_class", related_name="entitlements"
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField(null=True, blank=True, help_text="empty: open-ended")
    cu = models.DecimalField(**CU)
    # Workload envelope
    max_prompt_tokens = models.PositiveIntegerField()
    max_output_tokens = models.PositiveIntegerField()
    prompt_p50 = models.PositiveIntegerField()
    prompt_p95 = models.PositiveIntegerField()
    output_p50 = models.PositiveIntegerField()
    output_p95 = models.PositiveIntegerField()
    max_concurrency = models.PositiveIntegerField()
    ttft_p99_ms = models.PositiveIntegerField()
    tpot_p99_ms = models.PositiveIntegerField()
    streaming = models.BooleanField(default=True)
    overage = models.CharField(max_length=16, choices=Overage.choices, default=Overage.THROTTLE)
    borrowing_limit_cu = models.DecimalField(**CU, default=0)
    # Period budgets and a request-rate limit (issue 23, entitlements.limits): empty = no limit.
    daily_budget = models.PositiveBigIntegerField(null=True, blank=True, help_text="per local day, in budget_unit")
    monthly_budget = models.PositiveBigIntegerField(null=True, blank=True, help_text="per local month, in budget_unit")
    budget_unit = models.CharField(max_length=8, choices=limits.UNIT_CHOICES, default=limits.WT)
    budget_tz = models.CharField(
        max_length=64, default=limits.DEFAULT_TZ, validators=[limits.validate_tz], help_text="IANA zone of the periods"
    )
    max_rps = models.FloatField(null=True, blank=True, help_text="requests per second (token bucket)")
    burst = models.PositiveIntegerField(null=True, blank=True, help_text="requests; default max_rps")
    # Lending and fair share (issue 36.3): empty lending limit = lends all its idle room; empty
    # weight = 1. Only lenders (reserved, shared) have a lending limit, only best_effort a weight.
    lending_limit_cu = models.DecimalField(
        **CU, null=True, blank=True, help_text="CU this entitlement lends at most (reserved/shared); empty: all idle"
    )
    weight = models.FloatField(
        null=True, blank=True, help_text="best_effort: share of contended lendable room (0 < weight ≤ 1000); empty: 1"
    )
    # Spillover (issue 36.1, docs/spillover.md): another entitlement of the same tenant and model in
    # another pool (or a best_effort scope) serves what the own bucket cannot, within a budget of its own.
    spillover_target = models.ForeignKey(
        "self", on_delete=models.PROTECT, null=True, blank=True, related_name="spilled_from",
        help_text="entitlement (same tenant and model, another pool or best_effort) served when this one is empty",
    )  # fmt: skip
    spillover_budget_cu = models.DecimalField(
        **CU, null=True, blank=True, help_text="CU of spillover at most (a bucket of budget × R, 60 s deep)"
    )
    overflow = models.CharField(
        max_length=8, choices=Overflow.choices, default=Overflow.ALLOW,
        help_text="whether a reserve that does not say `overflow` spills over",
    )  # fmt: skip
    # docs/contract.md §10: the term the tenant committed to (launch approval records it) and when that
    # commitment ends; before then the CU may not be amended down (entitlements.commitments).
    term = models.CharField(max_length=12, choices=Term.choices, default=Term.ON_DEMAND, validators=[validate_term])
    committed_until = models.DateTimeField(null=True, blank=True, help_text="empty: no commitment")
    version = models.PositiveIntegerField(default=1)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["tenant__slug", "model__slug", "region__slug", "starts_at"]
        constraints = [
            models.CheckConstraint(condition=Q(cu__gte=0), name="ent_cu_nonneg"),
            models.CheckConstraint(condition=Q(borrowing_limit_cu__gte=0), name="ent_borrow_nonneg"),
            models.CheckConstraint(
                condition=Q(ends_at__isnull=True) | Q(ends_at__gt=F("starts_at")), name="ent_window_ordered"
            ),
            models.CheckConstraint(
                condition=Q(prompt_p50__lte=F("prompt_p95"))
                & Q(prompt_p95__lte=F("max_prompt_tokens"))
                & Q(output_p50__lte=F("output_p95"))
                & Q(output_p95__lte=F("max_output_tokens")),
                name="ent_envelope_ordered",
            ),
            models.CheckConstraint(condition=Q(max_concurrency__gt=0), name="ent_concurrency_positive"),
            models.CheckConstraint(
                condition=Q(traffic_class=BORROWING_CLASS) | (Q(borrowing_limit_cu=0) & Q(overage="throttle")),
                name="ent_only_best_effort_borrows",
            ),
            models.CheckConstraint(
                condition=(Q(daily_budget__isnull=True) | Q(daily_budget__gte=0))
                & (Q(monthly_budget__isnull=True) | Q(monthly_budget__gte=0))
                & (Q(max_rps__isnull=True) | Q(max_rps__gt=0))
                & (Q(burst__isnull=True) | (Q(burst__gt=0) & Q(max_rps__isnull=False))),
                name="ent_limits_positive",
            ),
            models.CheckConstraint(
                condition=Q(lending_limit_cu__isnull=True)
                | (Q(lending_limit_cu__gte=0) & Q(lending_limit_cu__lte=F("cu")) & ~Q(traffic_class=BORROWING_CLASS)),
                name="ent_lending_limit_lender_within_cu",
            ),
            models.CheckConstraint(
                condition=Q(weight__isnull=True)
                | (Q(weight__gt=0) & Q(weight__lte=MAX_WEIGHT) & Q(traffic_class=BORROWING_CLASS)),
                name="ent_weight_best_effort_positive",
            ),
            models.CheckConstraint(
                condition=Q(spillover_target__isnull=True, spillover_budget_cu__isnull=True)
                | (Q(spillover_target__isnull=False) & Q(spillover_budget_cu__gt=0) & ~Q(spillover_target=F("pk"))),
                name="ent_spillover_target_and_budget",
            ),
        ]
        indexes = [models.Index(fields=["pool", "starts_at"], name="ent_pool_window")]

    def __str__(self) -> str:
        return f"{self.tenant.slug} {self.model.slug}@{self.region.slug} {self.traffic_class_id} {self.cu} CU"

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if self.project is not None and self.tenant_id and self.project.tenant_id != self.tenant_id:
            errors["project"] = "the project belongs to another tenant"
        if self.pool_id:
            if self.model_id and self.pool.model_id != self.model_id:
                errors["pool"] = "the pool serves another model"
            if self.region_id and self.pool.region_id != self.region_id:
                errors["pool"] = "the pool is in another region"
        # A promise the model cannot keep: the longest request must fit in its context window (docs/contract.md §3).
        context = self.model.context_length if self.model_id else 0
        if context and self.max_prompt_tokens + self.max_output_tokens > context:
            errors["max_output_tokens"] = (
                f"max prompt + max output ({self.max_prompt_tokens} + {self.max_output_tokens}) exceed "
                f"{self.model.slug}'s context of {context} tokens"
            )
        for name, message in limits.check({f: getattr(self, f) for f in limits.LIMIT_FIELDS}).items():
            errors.setdefault(name, message)
        for name, message in self.lending_errors().items():
            errors.setdefault(name, message)
        for name, message in self.spillover_errors().items():
            errors.setdefault(name, message)
        if errors:
            raise ValidationError(errors)

    def lending_errors(self) -> dict[str, str]:
        """docs/contract.md §5 (issue 36.3): a lending limit only on a lender, within 0 and its CU; a weight
        only on best_effort, 0 < weight ≤ 1000; a borrowing limit or weight only with overage borrow.
        One message per field, naming it."""
        errors: dict[str, str] = {}
        cls = self.traffic_class_id
        if self.lending_limit_cu is not None:
            if cls == BORROWING_CLASS:
                errors["lending_limit_cu"] = f"only reserved and shared lend; {cls} has no lending limit"
            elif self.lending_limit_cu < 0:
                errors["lending_limit_cu"] = "must be at least 0"
            elif self.cu is not None and self.lending_limit_cu > self.cu:
                errors["lending_limit_cu"] = f"must be at most the entitlement's {self.cu} CU"
        if self.weight is not None:
            if cls != BORROWING_CLASS:
                errors["weight"] = f"only {BORROWING_CLASS} has a fair-share weight; {cls} does not"
            elif not 0 < self.weight <= MAX_WEIGHT:
                errors["weight"] = f"must be greater than 0 and at most {MAX_WEIGHT:g}"
        # Overage throttle never borrows, so a borrowing limit or weight would be a term that does nothing.
        if cls == BORROWING_CLASS and self.overage == self.Overage.THROTTLE:
            never = "overage throttle never borrows: set overage to borrow"
            if self.borrowing_limit_cu:
                errors.setdefault("borrowing_limit_cu", f"{never}, or the borrowing limit to 0")
            if self.weight is not None:
                errors.setdefault("weight", f"{never}, or leave the weight empty")
        return errors

    def spillover_errors(self) -> dict[str, str]:
        """docs/contract.md §5 "Spillover" (issue 36.1): a target and a budget go together; the target is
        another entitlement of the same tenant and model, live, in another pool or of class best_effort
        (a pool it is allowed in: the tenant holds an entitlement there). One message per field."""
        errors: dict[str, str] = {}
        target, budget = self.spillover_target, self.spillover_budget_cu
        if budget is not None:
            if target is None:
                errors["spillover_budget_cu"] = "a spillover budget needs a spillover_target"
            elif not budget > 0:
                errors["spillover_budget_cu"] = "must be greater than 0"
        if target is None:
            return errors
        if budget is None:
            errors["spillover_budget_cu"] = "a spillover target needs a budget (CU)"
        if self.pk is not None and target.pk == self.pk:
            errors["spillover_target"] = "an entitlement cannot spill over to itself"
        elif target.tenant_id != self.tenant_id:
            errors["spillover_target"] = "the target belongs to another tenant"
        elif target.model_id != self.model_id:
            errors["spillover_target"] = f"the target serves {target.model.slug}, not {self.model.slug}"
        elif target.revoked_at is not None:
            errors["spillover_target"] = "the target is revoked"
        elif target.pool_id == self.pool_id and target.traffic_class_id != BORROWING_CLASS:
            errors["spillover_target"] = (
                f"the target is in the same pool; spill to another pool or a {BORROWING_CLASS} scope"
            )
        return errors

    @property
    def effective_weight(self) -> float:
        return DEFAULT_WEIGHT if self.weight is None else float(self.weight)

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def rate_wt_per_s(self) -> float:
        return float(self.cu) * self.model.r_wt_per_s


class HistoryContext(models.Model):
    """SQLite has no session variables: the triggers read who and why from this one row.

    Writers are serialised on SQLite (IMMEDIATE transactions), so the row set inside a
    transaction belongs to that transaction. PostgreSQL uses `SET LOCAL` instead.
    """

    id = models.PositiveSmallIntegerField(primary_key=True)

    class Meta:
        verbose_name_plural = "history context"

    actor_id = models.BigIntegerField(null=True)
    reason = models.TextField(default="")

    def __str__(self) -> str:
        return f"actor {self.actor_id}: {self.reason}"


class EntitlementHistory(models.Model):
    """One row per insert, update or delete of an entitlement, written by a trigger."""

    entitlement_id = models.BigIntegerField(db_index=True)
    op = models.CharField(max_length=8)
    version = models.PositiveIntegerField(null=True)
    snapshot = models.JSONField()
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, null=True, db_constraint=False, related_name="+"
    )
    reason = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["entitlement_id", "pk"]
        verbose_name_plural = "entitlement history"

    def __str__(self) -> str:
        return f"entitlement {self.entitlement_id} {self.op} v{self.version}"
