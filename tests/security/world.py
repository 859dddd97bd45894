"""One small world with an object of every kind, and a person in every role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import Permission

from entitlements.models import PlatformRole
from entitlements.services import entitlement_grant
from tests import factories as f
from tests.factories import member
from tests.factories import platform_user as platform
from tests.portal.intake.launch_fields import complete_fields

CSV = b"TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:50.9951690,396,109\r\n"

PERSONAS = ("anonymous", "viewer", "requester", "approver", "operator", "gateway", "outsider")


@dataclass
class World:
    users: dict[str, Any]
    kwargs: dict[str, str]


def build_world() -> World:
    from alerts.models import AlertRule, Notification, WebhookEndpoint
    from forecasting.models import ForecastRun
    from portal.services.intake import launch_request_create
    from reconciliation.models import Finding
    from telemetry.trace_import import trace_import

    fleet = f.build_fleet()
    fleet.operator.is_staff = True
    fleet.operator.save(update_fields=["is_staff"])
    # As in the demo: staff status plus the entitlements app's permissions.
    fleet.operator.user_permissions.add(*Permission.objects.filter(content_type__app_label="entitlements"))
    users = {
        "anonymous": None,
        "viewer": member("acme-view", fleet.acme, "viewer"),
        "requester": member("acme-req", fleet.acme, "requester"),
        "approver": platform("appr", "approver"),
        "operator": fleet.operator,
        "gateway": platform("gw", "gateway"),
        "outsider": member("globex-req", fleet.globex, "requester"),
    }
    PlatformRole.objects.get_or_create(user=fleet.operator, role="operator")
    ent = entitlement_grant(actor=fleet.operator, reason="matrix", **f.grant_kwargs(fleet.pool_a, fleet.acme, "10"))
    launch = launch_request_create(actor=users["requester"], **complete_fields(fleet))
    trace = trace_import(data=CSV, name="acme trace", tenant=fleet.acme, uploaded_by=users["requester"])
    run = ForecastRun.objects.create(requested_by=fleet.operator)
    # alerts: an acme rule and endpoint, and a notification in the viewer's inbox
    rule = AlertRule.objects.create(name="acme use", scope="tenant", tenant=fleet.acme, kind="use_over_bought")
    hook = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme hook", url="http://127.0.0.1:9/")
    note = Notification.objects.create(user=users["viewer"], kind="alert.opened", title="acme use")
    # reconciliation: an open acme finding (issue 17.2)
    finding = Finding.objects.create(
        entitlement=ent, tenant=fleet.acme, pool=ent.pool, kind="right_size_down", window_start=ent.starts_at,
        window_end=ent.starts_at, action="Amend", recommended={"cu": 5.0},
    )  # fmt: skip
    op = fleet.pool_a.operating_point
    kwargs = {
        "slug:catalogue-model-detail": op.model.slug,
        "slug:catalogue-region-detail": fleet.pool_a.region.slug,
        "slug:catalogue-accelerator-detail": op.accelerator.slug,
        "slug": fleet.pool_a.slug,
        "pk": str(op.pk),
        "id": str(ent.uuid),
        "uuid:live-entitlement": str(ent.uuid),
        "uuid:entitlement-statement": str(ent.uuid),
        "uuid:entitlement-statement-page": str(ent.uuid),
        "uuid:entitlement-statement-csv": str(ent.uuid),
        "uuid": str(launch.uuid),
        "trace_id": str(trace.id),
        "run_id": str(run.id),
        "rule": str(rule.uuid),
        "endpoint": str(hook.uuid),
        "note": str(note.uuid),
        "finding": str(finding.pk),
    }
    return World(users=users, kwargs=kwargs)
