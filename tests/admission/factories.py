"""factory_boy factories for admission's models: a pool's health override and a reclaim event."""

from __future__ import annotations

from datetime import UTC, datetime

import factory

from admission.models import PoolHealthOverride, ReclaimEvent
from tests.factories import UserFactory


class PoolHealthOverrideFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PoolHealthOverride

    pool = None  # required: tests.factories.make_pool or build_fleet's
    replicas_healthy = 3
    replicas_total = 4
    set_by = factory.SubFactory(UserFactory)


class ReclaimEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ReclaimEvent

    pool = None  # required
    at = datetime(2026, 1, 5, tzinfo=UTC)
    latency_ms = 12.5
    borrowers_cut = 1
