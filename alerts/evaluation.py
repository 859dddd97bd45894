"""Evaluate enabled rules: open an episode (and tell people once) when a rule starts to hold for a
subject, resolve it when it stops. Holding on at the next pass changes nothing.

The partial unique constraint on open episodes makes opening idempotent even when two passes
race (a redelivered beat task, two workers): the loser's insert fails and it tells nobody.
One rule that cannot be evaluated is logged and skipped; the rest go on.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from alerts import recipients
from alerts.conditions import EVALUATORS, Context, Finding
from alerts.dispatch import Message, message_deliver
from alerts.models import AlertEpisode, AlertRule

log = logging.getLogger(__name__)


def _link(ep: AlertEpisode) -> str:
    """Where a person looks next: the entitlement's live page, the planning page, or the inbox."""
    if "entitlement" in ep.detail:
        return f"/entitlements/{ep.detail['entitlement']}/"
    if ep.rule.kind in (AlertRule.Kind.SUPPLY_GAP_ORDER_BY, AlertRule.Kind.FORECAST_RUN_FAILED):
        return "/planning/"
    if ep.tenant_id is not None:
        return "/usage/"
    return "/fleet/"


def episode_open(*, rule: AlertRule, key: str, finding: Finding, now: datetime) -> AlertEpisode | None:
    """Open the episode and tell people, in one transaction; None if it is already open."""
    try:
        with transaction.atomic():
            ep = AlertEpisode.objects.create(
                rule=rule,
                subject_key=key[:200],
                tenant=finding.tenant if finding.tenant is not None else rule.tenant,
                summary=finding.summary[:300],
                detail=finding.detail,
                opened_at=now,
            )
            _announce(rule, ep, "alert.opened", f"{rule.name}: {finding.summary}")
    except IntegrityError:
        return None  # open already: one alert per episode
    return ep


def _announce(rule: AlertRule, ep: AlertEpisode, kind: str, title: str) -> None:
    tenant_rule = rule.scope == AlertRule.Scope.TENANT
    people = recipients.tenant_members(rule.tenant) if tenant_rule else recipients.platform_staff()  # type: ignore[arg-type]
    channels = set(rule.channels or [])
    data = {
        "rule": {"id": str(rule.uuid), "name": rule.name, "kind": rule.kind, "scope": rule.scope},
        "episode": {
            "id": str(ep.uuid),
            "subject": ep.subject_key,
            "opened_at": ep.opened_at.isoformat(),
            "resolved_at": ep.resolved_at.isoformat() if ep.resolved_at else None,
            "detail": ep.detail,
        },
    }
    message = Message(kind=kind, title=title, body=ep.summary, link=_link(ep), data=data)
    if kind == "alert.resolved":
        # Machines close their incident; people are not paged again for good news.
        people = people.none()
    message_deliver(
        message=message,
        people=people,
        email="email" in channels,
        webhooks_of=(rule.tenant if tenant_rule else None) if "webhook" in channels else False,
        episode=ep,
    )


def alert_rules_evaluate(*, now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    opened = resolved = failed = 0
    # A disabled rule's open episodes end: re-enabling it starts a new episode rather than a stale one.
    AlertEpisode.objects.filter(rule__enabled=False, resolved_at__isnull=True).update(resolved_at=now)
    ctx = Context(now=now)
    rules = AlertRule.objects.filter(enabled=True).select_related("tenant", "pool__model", "pool__region")
    for rule in rules:
        try:
            findings = EVALUATORS[rule.kind](rule, ctx)
        except Exception:  # noqa: BLE001 - one broken rule must not stop the others
            log.exception("alert rule %s (%s) could not be evaluated", rule.pk, rule.kind)
            failed += 1
            continue
        open_now = dict(rule.episodes.filter(resolved_at__isnull=True).values_list("subject_key", "pk"))
        for key, finding in findings.items():
            if key not in open_now and episode_open(rule=rule, key=key, finding=finding, now=now):
                opened += 1
        for key, pk in open_now.items():
            if key in findings:
                continue
            with transaction.atomic():
                if AlertEpisode.objects.filter(pk=pk, resolved_at__isnull=True).update(resolved_at=now):
                    ep = AlertEpisode.objects.get(pk=pk)
                    _announce(rule, ep, "alert.resolved", f"{rule.name}: resolved: {ep.summary}")
                    resolved += 1
    return {"rules": len(rules), "opened": opened, "resolved": resolved, "failed": failed}
