"""The demo as the page tests see it: the demo fleet, two days of demand history (request counts in the
millions), a forecast's pool demand for every pool (some pools short, some covered) and one launch
request filed, sized and submitted by the demo requester."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from demo.history import seed_history
from entitlements.models import Entitlement, Pool, Region
from forecasting.models import ForecastRun, PoolDemand
from portal.models import LaunchRequest
from portal.services import intake


def build_demo(*, findings: bool = False) -> LaunchRequest:
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
    if findings:  # the reconciliation queue and a finding's page have something to show
        from reconciliation.models import ReconciliationRun
        from reconciliation.services import run_execute, run_request

        run = run_request(trigger="manual", now=now)
        if ReconciliationRun.objects.get(pk=run.pk).status == ReconciliationRun.Status.QUEUED:
            run_execute(run.pk)
    return LaunchRequest.objects.get(pk=req.pk)


def pages_of(who: str, req: LaunchRequest) -> list[str]:
    """The pages a demo persona reaches from the nav, one of each kind (an entitlement, a pool, a finding)."""
    from reconciliation.models import Finding

    ent = Entitlement.objects.filter(tenant__slug="acme").order_by("pk").first()
    assert ent is not None
    tenant = ["/", "/usage/", f"/entitlements/{ent.uuid}/", f"/entitlements/{ent.uuid}/statement/", "/alerts/"]
    tenant += ["/tokens/", "/reconciliation/", "/sizing/", "/launch/", f"/launch/{req.uuid}/"]
    finding = Finding.objects.order_by("kind", "pk")
    if who in ("demo-requester", "demo-viewer"):
        finding = finding.filter(tenant__slug="acme")
    findings = [f"/reconciliation/{f.pk}/" for f in finding[:1]]
    pool = Pool.objects.order_by("slug").first()
    staff = ["/", "/launch/queue/", f"/launch/{req.uuid}/", "/fleet/", "/planning/", "/reconciliation/", *findings]
    staff += [f"/planning/pools/{pool.slug}/", "/alerts/", "/usage/", "/sizing/", "/tokens/"] if pool else []
    if who == "demo-operator":
        return [*staff, "/alerts/rules/", "/alerts/webhooks/", f"/entitlements/{ent.uuid}/statement/"]
    if who == "demo-approver":
        return staff
    if who == "demo-requester":
        return [*tenant, *findings, "/launch/new", "/planning/mine/", "/alerts/rules/"]
    return [*tenant, "/planning/mine/"]
