"""factory_boy factories for alerts' models: rules (tenant-scoped by default), episodes,
notifications, webhook endpoints."""

from __future__ import annotations

from datetime import UTC, datetime

import factory

from alerts.models import AlertEpisode, AlertRule, Notification, WebhookEndpoint
from tests.factories import TenantFactory, UserFactory

T0 = datetime(2026, 1, 5, tzinfo=UTC)


class AlertRuleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AlertRule

    name = factory.Sequence(lambda n: f"rule {n}")
    scope = AlertRule.Scope.TENANT
    tenant = factory.SubFactory(TenantFactory)
    kind = AlertRule.Kind.USE_OVER_BOUGHT
    threshold = 90.0


class AlertEpisodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AlertEpisode

    rule = factory.SubFactory(AlertRuleFactory)
    subject_key = factory.Sequence(lambda n: f"entitlement:{n}")
    summary = "use at 95 % of bought"
    detail = factory.LazyFunction(lambda: {"use_pct": 95.0, "threshold": 90.0})
    opened_at = T0


class NotificationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Notification

    user = factory.SubFactory(UserFactory)
    kind = "alert.opened"
    title = "acme: use over 90 % of bought"


class WebhookEndpointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WebhookEndpoint

    name = factory.Sequence(lambda n: f"hook {n}")
    url = "http://127.0.0.1:9/hook"
    created_by = factory.SubFactory(UserFactory)
