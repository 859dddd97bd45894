"""The demo as the page tests see it: the demo fleet, two days of demand history (request counts in the
millions), a forecast's pool demand for every pool (some pools short, some covered) and one launch
request filed, sized and submitted by the demo requester. With `everything`, also what `make run`
adds for a first visit (reconciliation findings of every kind, the seeded launch requests in every
state) and a tenant webhook with a delivery log, so the page walks reach every kind of page."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from demo.history import seed_history
from entitlements.models import Entitlement, Pool, Region
from forecasting.models import ForecastRun, PoolDemand
from portal.models import LaunchRequest
from portal.services import intake


def build_demo(*, findings: bool = False, everything: bool = False) -> LaunchRequest:
    call_command("load_demo", stdout=StringIO())
    now = timezone.now()
    seed_history(days=2, now=now)
    run = ForecastRun.objects.create(status="succeeded", progress=100, attempts=1, results_written=1, finished_at=now)
    for i, pool in enumerate(Pool.objects.order_by("slug")):
        # Flat weekly demand around what is sold: some pools short, some covered.
        level = float(pool.breakdown().physical) * (0.5 + 0.25 * (i % 4))
        PoolDemand.objects.create(
            run=run,
            pool=pool,
            start=now,
            tenants={"acme": 1.0},
            hourly={k: [level * f] * (26 * 168) for k, f in (("expected", 1.0), ("upside", 1.3), ("stress", 1.8))},
        )
    requester = get_user_model().objects.get(username="demo-requester")
    ent = Entitlement.objects.select_related("model").filter(tenant__slug="acme").first()
    today = now.date()
    req = intake.launch_request_create(actor=requester, title="Walk launch")
    intake.launch_request_update(
        actor=requester,
        request=req.uuid,
        model=ent.model,
        regions=[Region.objects.get(pk=ent.region_id)],
        launch_date=today + timedelta(days=7),
        end_date=today + timedelta(days=90),
        traffic_class="reserved",
        max_prompt_tokens=4000,
        max_output_tokens=1000,
        prompt_p50=800,
        prompt_p95=3000,
        output_p50=200,
        output_p95=800,
        max_concurrency=64,
        ttft_p99_ms=2000,
        tpot_p99_ms=200,
        committed_basis="wt_per_min",
        committed_value=123_456_789.0,
        expected_basis="rps",
        expected_value=2.0,
        upside_basis="rps",
        upside_value=3.0,
        stress_basis="rps",
        stress_value=4.0,
        justification="walk",
    )
    intake.launch_request_submit(actor=requester, request=req.uuid)
    if everything:
        _seed_everything(now)
    if findings or everything:  # the reconciliation queue and a finding's page have something to show
        from reconciliation.models import ReconciliationRun
        from reconciliation.services import run_execute, run_request

        run = run_request(trigger="manual", now=now)
        if ReconciliationRun.objects.get(pk=run.pk).status == ReconciliationRun.Status.QUEUED:
            run_execute(run.pk)
    return LaunchRequest.objects.get(pk=req.pk)


def _seed_everything(now: datetime) -> None:
    from alerts.models import WebhookDelivery
    from alerts.services import webhook_endpoint_create
    from demo.launches import seed_launch_requests
    from entitlements.models import Tenant

    seed_launch_requests()
    operator = get_user_model().objects.get(username="demo-operator")
    ep = webhook_endpoint_create(
        actor=operator, tenant=Tenant.objects.get(slug="acme"), name="acme on-call", url="https://hooks.example.com/x"
    )
    for attempt, status, code, error in ((1, "retried", 503, "failed: HTTP 503"), (2, "delivered", 200, "")):
        WebhookDelivery.objects.create(
            endpoint=ep,
            event_id=uuid.uuid4(),
            event_type="launch_request.approved",
            payload={"title": "Walk launch"},
            attempt=attempt,
            status=status,
            status_code=code,
            error=error,
            next_attempt_at=now,
            attempted_at=now,
            delivered_at=now if status == "delivered" else None,
            duration_ms=123.456789,
        )


PERSONAS = ("demo-operator", "demo-approver", "demo-requester", "demo-viewer", "demo-outsider")


def _first_of_each(objects: Any, key: str) -> list[Any]:
    seen: dict[str, Any] = {}
    for obj in objects:
        seen.setdefault(getattr(obj, key), obj)
    return list(seen.values())


def pages_of(who: str, req: LaunchRequest) -> list[str]:
    """The pages a demo persona reaches: every page of the nav, and one of each kind of object it may
    open (an entitlement of each traffic class and its statement, a pool, a finding of each kind, a launch request in each
    state with its edit form where it may edit, a webhook, the amendment form)."""
    from alerts.models import WebhookEndpoint
    from reconciliation.models import Finding

    staff = who in ("demo-operator", "demo-approver")
    tenant = "globex" if who == "demo-outsider" else "acme"
    ents = _first_of_each(Entitlement.objects.filter(tenant__slug=tenant).order_by("pk"), "traffic_class_id")
    assert ents, tenant
    findings = Finding.objects.order_by("kind", "pk")
    launches = LaunchRequest.objects.order_by("state", "pk")
    hooks = WebhookEndpoint.objects.order_by("pk")
    if not staff:
        findings, launches = findings.filter(tenant__slug=tenant), launches.filter(tenant__slug=tenant)
        hooks = hooks.filter(tenant__slug=tenant)
    findings_each = _first_of_each(findings, "kind")
    launches_each = _first_of_each(launches, "state")
    if req not in launches_each and (staff or req.tenant.slug == tenant):
        launches_each.append(req)
    pages = ["/", "/usage/", "/sizing/", "/alerts/", "/alerts/rules/", "/alerts/webhooks/", "/tokens/"]
    pages += ["/reconciliation/", *[f"/reconciliation/{f.pk}/" for f in findings_each]]
    pages += [f"/launch/{r.uuid}/" for r in launches_each]
    pages += [f"/alerts/webhooks/{h.uuid}/" for h in hooks[:1]]
    for ent in ents:  # one of each traffic class
        pages += [f"/entitlements/{ent.uuid}/", f"/entitlements/{ent.uuid}/statement/"]
    if staff:
        pool = Pool.objects.order_by("slug").first()
        pages += ["/launch/queue/", "/fleet/", "/planning/"] + ([f"/planning/pools/{pool.slug}/"] if pool else [])
    else:
        pages += ["/launch/", "/planning/mine/"]
    if who == "demo-operator":
        amendable = [f for f in findings_each if f.entitlement_id and f.state == Finding.State.OPEN]
        pages += [f"/reconciliation/{f.pk}/amend/" for f in amendable[:1]]
    if who in ("demo-requester", "demo-outsider"):
        pages += ["/launch/new"]
        pages += [f"/launch/{r.uuid}/edit" for r in launches_each if r.state in ("draft", "returned")]
    return pages
