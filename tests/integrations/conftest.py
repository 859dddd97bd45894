"""The live portal the gateway end-to-end tests run against."""

from __future__ import annotations

import pytest

from admission import backends, params
from admission.backends.memory import MemoryBackend
from entitlements import models as m
from tests import factories as f
from tests.admission.world import build_world


@pytest.fixture
def portal(live_server, fleet):
    """The live portal with the tiny world on a fresh in-process store, and a gateway token."""
    world = build_world(fleet)
    prev = backends.set_backend(MemoryBackend())
    params.invalidate()
    user = f.UserFactory(username="gw-gateway")
    m.PlatformRole.objects.get_or_create(user=user, role="gateway")
    _, token = m.ApiToken.issue(user)
    yield live_server.url, token, world
    backends.set_backend(prev)
    params.invalidate()
