"""Launch intake: a tenant asks for capacity for a launch, an approver decides.

The state lives in a protected FSMField, so only the transition methods below move it; the
services in `portal.services.intake` are the only callers, and they check roles, tenancy and
self-approval before a transition runs. ConcurrentTransitionMixin makes a save fail when the
row's state changed since it was read, a second guard behind the service's row lock.

Drafts are autosaved field by field, so every request field is optional in the database;
`launch_request_missing` in the services says what a submission still lacks.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import F, Q
from django_fsm import ConcurrentTransitionMixin, FSMField, transition

from capacity.minute_cv import DEFAULT_KIND, catalogue
from capacity.planning import TARGET_RANGE
from capacity.ranges import RANGES
from entitlements import roles
from entitlements.models import Entitlement, Pool, Region, ServedModel, Tenant
from entitlements.models.supply import CU


class State(models.TextChoices):
    DRAFT = "draft", "Draft"
    SUBMITTED = "submitted", "Submitted"
    APPROVED = "approved", "Approved"
    PARTIALLY_APPROVED = "partially_approved", "Partially approved"
    REJECTED = "rejected", "Rejected"
    RETURNED = "returned", "Returned for changes"
    WITHDRAWN = "withdrawn", "Withdrawn"


class Basis(models.TextChoices):
    RPS = "rps", "peak requests/s"
    WT_PER_MIN = "wt_per_min", "weighted tokens/min"


SCENARIOS = ("committed", "expected", "upside", "stress")

# Plausible ranges of a launch request (README "Input ranges"): far above any real launch, far
# below what would break a page that sizes it or a number column. A row stored before these
# limits still renders (the sizing is bounded) and can be rejected; it cannot be submitted as is.
TOKENS_MAX = 10_000_000  # per request: ten times the longest context served today
CONCURRENCY_MAX = 1_000_000
TTFT_MS_MAX = 600_000  # ten minutes to a first token
TPOT_MS_MAX = 60_000
SCENARIO_MAX = {"rps": 100_000.0, "wt_per_min": 1e12}  # per basis; the field itself stops at the larger
SCENARIO_VALIDATORS = [MinValueValidator(0.0), MaxValueValidator(max(SCENARIO_MAX.values()))]
# The envelope replay's minute-rate CV: the calculator's own range (capacity.ranges), 0 to 5.
CV_RANGE = RANGES["minute_rate_cv"]


def known_workload_kind(value: str) -> None:
    """A workload kind of the catalogue (data/workload_cv.csv); not model choices, so a kind added to the
    catalogue needs no migration."""
    if value not in catalogue():
        raise ValidationError(f"unknown workload kind {value[:32]!r}: expected one of {', '.join(sorted(catalogue()))}")


# Transition permissions: django-fsm calls these with (instance, user). Tenancy (404) is checked
# before them by the services; these answer "may this person take this step" (403). `req` is Any:
# django-fsm's stubs type the instance as a bare Model, and a LaunchRequest parameter would not match.
def _is_requester_of(req: Any, user: object) -> bool:
    return roles.REQUESTER in roles.roles_of(user) and roles.tenant_of(user) == req.tenant


def _is_deciding_approver(req: Any, user: object) -> bool:
    # An approver never decides on a request they filed, whatever other roles they hold.
    return roles.APPROVER in roles.roles_of(user) and req.created_by_id != getattr(user, "pk", None)


def _has_regions(req: Any) -> bool:
    # Last-line guard: the services name missing fields first (400); this keeps a request with
    # nowhere to grant from ever reaching submitted or approved.
    return req.region_rows.exists()


class LaunchRequest(ConcurrentTransitionMixin, models.Model):
    class TrafficClassChoice(models.TextChoices):
        RESERVED = "reserved", "Reserved (guaranteed)"
        SHARED = "shared", "Shared (guaranteed, may lend)"
        BEST_EFFORT = "best_effort", "Best effort (no guarantee)"

    class Criticality(models.TextChoices):
        LOW = "low", "Low"
        MEDIUM = "medium", "Medium"
        HIGH = "high", "High"
        CRITICAL = "critical", "Critical"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="launch_requests")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    title = models.CharField(max_length=160, blank=True)
    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    regions = models.ManyToManyField(Region, through="LaunchRequestRegion", related_name="+")
    launch_date = models.DateField(null=True, blank=True)
    end_date = models.DateField(null=True, blank=True, help_text="empty: open-ended")
    traffic_class = models.CharField(max_length=16, choices=TrafficClassChoice.choices, default="reserved")
    # Workload envelope: the request shape the promise assumes.
    max_prompt_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    max_output_tokens = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    prompt_p50 = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    prompt_p95 = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    output_p50 = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    output_p95 = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TOKENS_MAX)])
    max_concurrency = models.PositiveIntegerField(
        null=True, blank=True, validators=[MaxValueValidator(CONCURRENCY_MAX)]
    )
    ttft_p99_ms = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TTFT_MS_MAX)])
    tpot_p99_ms = models.PositiveIntegerField(null=True, blank=True, validators=[MaxValueValidator(TPOT_MS_MAX)])
    streaming = models.BooleanField(default=True)
    # Four demand scenarios, each per region, as a peak arrival rate or a weighted-token rate.
    committed_basis = models.CharField(max_length=12, choices=Basis.choices, default=Basis.RPS)
    committed_value = models.FloatField(null=True, blank=True, validators=SCENARIO_VALIDATORS)
    expected_basis = models.CharField(max_length=12, choices=Basis.choices, default=Basis.RPS)
    expected_value = models.FloatField(null=True, blank=True, validators=SCENARIO_VALIDATORS)
    upside_basis = models.CharField(max_length=12, choices=Basis.choices, default=Basis.RPS)
    upside_value = models.FloatField(null=True, blank=True, validators=SCENARIO_VALIDATORS)
    stress_basis = models.CharField(max_length=12, choices=Basis.choices, default=Basis.RPS)
    stress_value = models.FloatField(null=True, blank=True, validators=SCENARIO_VALIDATORS)
    # The planning answer's target (docs/contract.md §3): the share of requests the bucket may throttle at the
    # CU to buy. Empty: the class's default (settings.PLANNING_TARGET_THROTTLED_SHARE), as the calculator.
    target_throttled_share = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(TARGET_RANGE[0]), MaxValueValidator(TARGET_RANGE[1])],
        help_text="share of requests the token bucket may throttle at the CU to buy; empty: the class default",
    )
    # The envelope replay's minute-rate CV (docs/contract.md §3, capacity.planning_workload): how far each
    # minute's rate swings around the scenario's. Empty: telemetry.minute_cv.envelope_cv's default.
    minute_rate_cv = models.FloatField(
        null=True,
        blank=True,
        validators=[MinValueValidator(CV_RANGE.low), MaxValueValidator(CV_RANGE.high)],
        help_text="coefficient of variation of the one-minute request rate in the replay; empty: the default",
    )
    # Which catalogue kind the traffic is (data/workload_cv.csv, docs/contract.md §3): its minute-rate CV is the
    # envelope's default when the request states none and its tenant × model × class has recorded none.
    # One per request, as the CV: the four scenarios are volumes of the same traffic.
    workload_kind = models.CharField(
        max_length=32,
        default=DEFAULT_KIND,
        validators=[known_workload_kind],
        help_text="the catalogue's workload kind whose minute-rate CV is the default (data/workload_cv.csv)",
    )
    criticality = models.CharField(max_length=12, choices=Criticality.choices, default=Criticality.MEDIUM)
    justification = models.TextField(blank=True)
    # Issue 52: filed against an alternative the availability rows showed (another accelerator in one of the
    # request's regions); the approval grants there when the approver names no other pool.
    proposed_pool = models.ForeignKey(
        Pool,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="the pool the request is filed against, in one of its regions; empty: the pool rule picks",
    )
    state = FSMField(default=State.DRAFT, choices=State.choices, protected=True, db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.CheckConstraint(
                condition=Q(end_date__isnull=True) | Q(launch_date__isnull=True) | Q(end_date__gt=F("launch_date")),
                name="launch_window_ordered",
            ),
            *[
                models.CheckConstraint(
                    condition=Q(**{f"{s}_value__isnull": True}) | Q(**{f"{s}_value__gte": 0}),
                    name=f"launch_{s}_nonneg",
                )
                for s in SCENARIOS
            ],
        ]

    def __str__(self) -> str:
        return self.title or f"launch request {self.uuid}"

    def clean(self) -> None:
        errors = {}
        for s in SCENARIOS:
            basis, value = self.scenario(s)
            limit = SCENARIO_MAX.get(basis)
            if value is not None and limit is not None and value > limit:
                errors[f"{s}_value"] = f"at most {limit:,.0f} {Basis(basis).label}"
        if errors:
            raise ValidationError(errors)

    @property
    def is_editable(self) -> bool:
        return self.state in (State.DRAFT, State.RETURNED)

    def scenario(self, name: str) -> tuple[str, float | None]:
        return getattr(self, f"{name}_basis"), getattr(self, f"{name}_value")

    # Transitions. Bodies are empty: the services record who/when/why in LaunchRequestEvent.
    @transition(
        field=state,
        source=State.DRAFT,
        target=State.SUBMITTED,
        conditions=[_has_regions],
        permission=_is_requester_of,
    )
    def submit(self) -> None:
        pass

    @transition(
        field=state,
        source=State.SUBMITTED,
        target=State.APPROVED,
        conditions=[_has_regions],
        permission=_is_deciding_approver,
    )
    def approve(self) -> None:
        pass

    @transition(
        field=state,
        source=State.SUBMITTED,
        target=State.PARTIALLY_APPROVED,
        conditions=[_has_regions],
        permission=_is_deciding_approver,
    )
    def partially_approve(self) -> None:
        pass

    @transition(field=state, source=State.SUBMITTED, target=State.REJECTED, permission=_is_deciding_approver)
    def reject(self) -> None:
        pass

    @transition(field=state, source=State.SUBMITTED, target=State.RETURNED, permission=_is_deciding_approver)
    def return_to_requester(self) -> None:
        pass

    @transition(field=state, source=State.RETURNED, target=State.DRAFT, permission=_is_requester_of)
    def reopen(self) -> None:
        pass

    @transition(field=state, source=[State.DRAFT, State.SUBMITTED], target=State.WITHDRAWN, permission=_is_requester_of)
    def withdraw(self) -> None:
        pass


class LaunchRequestRegion(models.Model):
    """One row per region asked for; the decision fills in what was granted there."""

    request = models.ForeignKey(LaunchRequest, on_delete=models.CASCADE, related_name="region_rows")
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="+")
    approved_cu = models.DecimalField(**CU, null=True, blank=True)
    entitlement = models.OneToOneField(
        Entitlement, on_delete=models.PROTECT, null=True, blank=True, related_name="launch_request_region"
    )

    class Meta:
        ordering = ["region__slug"]
        constraints = [
            models.UniqueConstraint(fields=["request", "region"], name="launch_region_unique"),
            models.CheckConstraint(
                condition=Q(approved_cu__isnull=True) | Q(approved_cu__gte=0), name="launch_region_cu_nonneg"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id}@{self.region_id}"


class LaunchRequestEvent(models.Model):
    """The audit trail and activity feed: one row per transition (and the filing)."""

    request = models.ForeignKey(LaunchRequest, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    transition = models.CharField(max_length=24)
    comment = models.TextField(blank=True)
    from_state = models.CharField(max_length=24, blank=True)
    to_state = models.CharField(max_length=24)
    changes = models.JSONField(default=dict, blank=True, help_text="changed fields: {name: [before, after]}")

    class Meta:
        ordering = ["request_id", "at", "pk"]

    def __str__(self) -> str:
        return f"{self.transition}: {self.from_state} → {self.to_state}"
