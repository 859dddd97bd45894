"""Setting a tenant's or project's $ budget (issue 51.3): validated by field, audited with who and why."""

from __future__ import annotations

import math
from typing import Any

from django.db import transaction

from entitlements.models import Project, Tenant, UsdBudgetChange
from entitlements.models.tenancy import MAX_BUDGET_USD


class UsdBudgetError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def check_amount(v: Any) -> float | None:
    """The `budget_usd` a caller sent: None clears it; else a finite number in [0, MAX_BUDGET_USD]."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise UsdBudgetError("budget_usd", "must be a number of dollars per month, or null to remove the budget")
    try:
        f = float(v)
    except OverflowError:  # an integer past any float (10**400)
        f = math.inf
    if not math.isfinite(f) or not 0 <= f <= MAX_BUDGET_USD:
        raise UsdBudgetError(
            "budget_usd", f"must be at least 0 (0 refuses every request) and at most {MAX_BUDGET_USD:,.0f}"
        )
    return f


def set_usd_budget(*, actor: Any, tenant: Any, project: Any, budget_usd: Any, reason: Any) -> UsdBudgetChange:
    amount = check_amount(budget_usd)
    if not isinstance(reason, str) or not reason.strip():
        raise UsdBudgetError("reason", "say why the budget changes (kept in the audit trail)")
    t = Tenant.objects.filter(slug=tenant).first() if isinstance(tenant, str) else None
    if t is None:
        raise UsdBudgetError("tenant", f"no tenant {tenant!r}")
    p = None
    if project is not None and not isinstance(project, str):
        raise UsdBudgetError("project", "must be a project's slug, or absent for the tenant's own budget")
    if project:
        p = Project.objects.filter(tenant=t, slug=project).first()
        if p is None:
            raise UsdBudgetError("project", f"no project {project!r} in tenant {t.slug}")
    target: Tenant | Project = p if p is not None else t
    with transaction.atomic():
        target = type(target).objects.select_for_update().get(pk=target.pk)
        old = target.budget_usd
        target.budget_usd = amount
        target.save(update_fields=["budget_usd"])  # a save: this process's snapshot sees it at once
        return UsdBudgetChange.objects.create(
            tenant=t, project=p, old_usd=old, new_usd=amount, actor=actor, reason=reason.strip()[:500]
        )
