"""Every app's factories make valid rows (full_clean passes and the row is stored)."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.admission.factories import PoolHealthOverrideFactory, ReclaimEventFactory
from tests.alerts.factories import AlertEpisodeFactory, NotificationFactory, WebhookEndpointFactory
from tests.forecasting.factories import (
    ForecastRunFactory,
    ForecastSeriesFactory,
    PoolDemandFactory,
    SupplyOrderFactory,
)
from tests.portal.factories import launch_request
from tests.telemetry.factories import DeadLetterFactory, FleetSampleFactory, PrometheusSourceFactory

pytestmark = pytest.mark.django_db


def test_every_apps_factories_make_valid_rows(fleet):
    pool = fleet.pool_a
    rows = [
        ForecastSeriesFactory(run=ForecastRunFactory(), tenant=fleet.acme),
        PoolDemandFactory(pool=pool),
        SupplyOrderFactory(pool=pool),
        FleetSampleFactory(pool=pool),
        PrometheusSourceFactory(),
        DeadLetterFactory(),
        AlertEpisodeFactory(rule__tenant=fleet.acme),
        NotificationFactory(),
        WebhookEndpointFactory(),
        PoolHealthOverrideFactory(pool=pool),
        ReclaimEventFactory(pool=pool),
        launch_request(fleet, f.member("req", fleet.acme, "requester")),
    ]
    for row in rows:
        # a launch request's state is django-fsm's to change (protected), as the intake service cleans it
        row.full_clean(exclude=["state"] if type(row).__name__ == "LaunchRequest" else None)
        assert type(row).objects.filter(pk=row.pk).exists()
