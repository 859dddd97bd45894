"""Reconciliation runs, and accepting or dismissing what they found (issue 17.2).

A run is asked for (a row, then a Celery task once the row is committed: inline under the embedded
default, CELERY_TASK_ALWAYS_EAGER, as forecasting's runs are), reads every entitlement active over
its window, and writes findings: an open finding of the same kind is refreshed, not duplicated; an
open one whose condition no longer holds is closed as dismissed by the run. Accepting a finding with
a CU delta writes a forecasting.CommittedAdjustment, so the next committed series counts it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from capacity.input_errors import FieldError
from entitlements import roles
from entitlements.models import Entitlement
from entitlements.selectors import overlapping
from entitlements.services import ENVELOPE_FIELDS
from forecasting.history import demand_series
from forecasting.models import CommittedAdjustment, ForecastSeries
from reconciliation import figures, rules
from reconciliation.models import Finding, FindingAct, ForecastAccuracy, PoolReview, ReconciliationRun
from runs import claims


class FindingError(FieldError):
    """Accepting or dismissing a finding: the field at fault (reason, state) and why."""


def _window(now: Any = None) -> tuple[Any, Any]:
    end = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    return end - timedelta(days=settings.RECONCILE_WINDOW_DAYS), end


def run_request(*, requested_by: Any = None, trigger: str = "manual", now: Any = None) -> ReconciliationRun:
    start, end = _window(now)
    with transaction.atomic():
        run = ReconciliationRun.objects.create(
            window_start=start,
            window_end=end,
            trigger=trigger,
            requested_by=requested_by if getattr(requested_by, "pk", None) else None,
        )
        from reconciliation.tasks import run_reconciliation

        run_id = str(run.pk)
        transaction.on_commit(lambda: run_reconciliation.delay(run_id))
    return run


def run_execute(run_id: Any, *, worker: str | None = None) -> ReconciliationRun:
    """Claim the run (runs.claims: a queued run, or a running one whose worker stopped checkpointing),
    reconcile it entitlement by entitlement, and finish it once. A redelivered task whose run a live
    worker holds, or that is done, returns the run as it is ('busy' / 'done')."""
    worker = worker or claims.worker_id()
    if claims.claim(ReconciliationRun, pk=run_id, worker=worker) != "claimed":
        return ReconciliationRun.objects.get(pk=run_id)
    run = ReconciliationRun.objects.get(pk=run_id)
    try:
        written, read = _reconcile(run, worker)
        forecast_accuracy(now=run.window_end)
    except claims.ClaimLost:
        return ReconciliationRun.objects.get(pk=run_id)  # taken over: the new claimant finishes it
    except Exception as exc:
        claims.fail(ReconciliationRun, pk=run_id, worker=worker, error=f"{type(exc).__name__}: {exc}", limit=2000)
        raise
    claims.finish(ReconciliationRun, pk=run_id, worker=worker, findings_written=written, entitlements_read=read)
    return ReconciliationRun.objects.get(pk=run_id)


def _reconcile(run: ReconciliationRun, worker: str) -> tuple[int, int]:
    """Each entitlement in its own transaction, which starts by checkpointing the claim (and so holds
    the run's row until it commits): a worker that lost the run writes nothing more. A finding this
    run already wrote (an earlier claimant's, before it died) is counted, not written again."""
    ents = list(
        overlapping(Entitlement.objects.filter(revoked_at__isnull=True), run.window_start, run.window_end)
        .select_related("tenant", "project", "model", "region", "pool__accelerator", "traffic_class")
        .order_by("pk")
    )
    written = 0
    for ent in ents:
        f = figures.read(ent, run.window_start, run.window_end)
        found = {p.kind: p for rule in rules.RULES if (p := rule(f)) is not None}
        with transaction.atomic():
            claims.hold(ReconciliationRun, pk=run.pk, worker=worker)
            for kind in Finding.Kind.values:
                open_one = Finding.objects.select_for_update().filter(entitlement=ent, kind=kind, state="open").first()
                p = found.get(kind)
                if p is None:
                    if open_one is not None:
                        _close(open_one, None, "dismissed", f"no longer observed by run {run.pk}")
                    continue
                if open_one is None or open_one.run_id != run.pk:
                    _write(run, ent, p, open_one)
                written += 1
    return written, len(ents)


def _snapshot(f: Finding) -> dict[str, Any]:
    return {"state": f.state, "action": f.action, "cu_delta": str(f.cu_delta) if f.cu_delta is not None else None,
            "evidence": f.evidence, "recommended": f.recommended}  # fmt: skip


def _write(run: ReconciliationRun, ent: Entitlement, p: rules.Proposal, open_one: Finding | None) -> Finding:
    f = open_one or Finding(entitlement=ent, tenant=ent.tenant, pool=ent.pool, kind=p.kind)
    f.run, f.window_start, f.window_end = run, run.window_start, run.window_end
    f.evidence, f.action, f.cu_delta, f.recommended = p.evidence, p.action, p.cu_delta, p.recommended
    f.save()
    FindingAct.objects.create(finding=f, act="refreshed" if open_one else "found", snapshot=_snapshot(f))
    if p.kind == Finding.Kind.PLATFORM_OWES:
        PoolReview.objects.update_or_create(finding=f, defaults={"pool": ent.pool, "hours": p.recommended["hours"]})
    return f


def _close(f: Finding, actor: Any, state: str, reason: str) -> None:
    f.state, f.acted_by, f.acted_at, f.reason = state, actor, timezone.now(), reason
    f.save(update_fields=["state", "acted_by", "acted_at", "reason", "updated_at"])
    FindingAct.objects.create(finding=f, actor=actor, act=state, reason=reason, snapshot=_snapshot(f))
    if state == "dismissed":
        PoolReview.objects.filter(finding=f, closed_at__isnull=True).update(closed_at=f.acted_at)


def may_act(user: Any) -> bool:
    return roles.has_any(user, roles.OPERATOR, roles.APPROVER)


def visible_findings(user: Any) -> Any:
    """Staff see every finding; tenant members their tenant's; anyone else none."""
    qs = Finding.objects.select_related("entitlement__model", "entitlement__region", "tenant", "pool")
    if roles.is_staff_role(user):
        return qs
    tenant = roles.tenant_of(user)
    if tenant is None or not roles.has_any(user, roles.VIEWER, roles.REQUESTER):
        return qs.none()
    return qs.filter(tenant=tenant)


@transaction.atomic
def finding_accept(*, actor: Any, finding: Finding, reason: str, adjust: bool = True) -> Finding:
    """Accept; with a CU delta (and `adjust`, unless the caller amended the entitlement itself just now),
    the committed series counts the delta from now until the entitlement is amended."""
    f = _lock_open(actor, finding, reason)
    _close(f, actor, "accepted", reason)
    if adjust and f.cu_delta is not None and f.cu_delta != 0:
        ent = Entitlement.objects.get(pk=f.entitlement_id)
        CommittedAdjustment.objects.create(
            entitlement=ent,
            cu_delta=f.cu_delta,
            from_ts=f.acted_at,  # type: ignore[misc]  # set by _close just above
            entitlement_version=ent.version,
            source=f"reconciliation finding {f.pk} ({f.kind})",
        )
    return f


@transaction.atomic
def finding_dismiss(*, actor: Any, finding: Finding, reason: str) -> Finding:
    f = _lock_open(actor, finding, reason)
    _close(f, actor, "dismissed", reason)
    return f


def _lock_open(actor: Any, finding: Finding, reason: str) -> Finding:
    if not may_act(actor):
        raise PermissionError("only operators and approvers act on findings")
    if not isinstance(reason, str) or not reason.strip():
        raise FindingError("reason", "say why")
    f = Finding.objects.select_for_update().get(pk=finding.pk)
    if f.state != Finding.State.OPEN:
        raise FindingError("state", f"this finding is already {f.state}")
    return f


def forecast_accuracy(*, now: Any = None) -> int:
    """For every stored forecast series with hours now past: realised demand (the same hourly series
    the forecast learns from, forecasting.history) against its P50 (`expected`) and P90 (`upside`)."""
    now = (now or timezone.now()).replace(minute=0, second=0, microsecond=0)
    series = list(ForecastSeries.objects.filter(start__lt=now).select_related("run"))
    if not series:
        return 0
    first = min(s.start for s in series)
    realised = {d.key: d for d in demand_series(start=first, end=now)}
    n = 0
    for s in series:
        p50 = np.asarray(s.hourly.get("expected") or [], dtype=float)
        p90 = np.asarray(s.hourly.get("upside") or [], dtype=float)
        past = min(len(p50), len(p90), int((now - s.start).total_seconds() // 3600))
        if past <= 0:
            continue
        d = realised.get((s.tenant_slug, s.model, s.region))
        got = np.zeros(past)
        if d is not None:
            off = int((s.start - d.start).total_seconds() // 3600)
            for i in range(past):
                j = off + i
                if 0 <= j < len(d.values):
                    got[i] = d.values[j]
        a, b = p50[:past], p90[:past]
        ForecastAccuracy.objects.update_or_create(
            series=s,
            defaults={
                "run": s.run, "tenant_slug": s.tenant_slug, "model": s.model, "region": s.region, "hours": past,
                "realised_mean_cu": float(got.mean()), "p50_mean_cu": float(a.mean()), "p90_mean_cu": float(b.mean()),
                "share_above_p50": float((got > a).mean()), "share_above_p90": float((got > b).mean()),
                "wape_p50": float(np.abs(got - a).sum() / got.sum()) if got.sum() > 0 else None,
            },
        )  # fmt: skip
        n += 1
    return n


def launch_request_fields(user: Any, finding: Any) -> dict[str, Any] | None:
    """A launch request's fields prefilled from a finding this person may see (None: no such finding):
    the entitlement's model, region and envelope (the recommended one for a drift), the recommended
    traffic class, and the recommended CU as the committed and expected demand in weighted tokens a
    minute (CU × R × 60). portal's intake files it (portal sits above this layer)."""
    try:
        f = visible_findings(user).select_related("entitlement__model", "entitlement__region").get(pk=finding)
    except (Finding.DoesNotExist, ValueError, ValidationError):
        return None
    ent, rec = f.entitlement, f.recommended or {}
    env = {name: getattr(ent, name) for name in ENVELOPE_FIELDS} | (rec.get("envelope") or {})
    cu = float(rec.get("cu") or ent.cu)
    wt_per_min = round(cu * ent.model.r_wt_per_s * 60, 3)
    return {
        "title": f"{f.get_kind_display()}: {ent.model.slug} in {ent.region.slug}"[:160],
        "model": ent.model,
        "regions": [ent.region],
        "traffic_class": rec.get("traffic_class", ent.traffic_class_id),
        **env,
        "committed_basis": "wt_per_min",
        "committed_value": wt_per_min,
        "expected_basis": "wt_per_min",
        "expected_value": wt_per_min,
        "justification": f"From reconciliation finding {f.pk}: {f.action}",
    }
