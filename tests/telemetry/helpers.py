"""Event builders for telemetry tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

# Noon three days ago: inside ingest's plausible window (7 days back), with room for two days of events after it.
T0 = (datetime.now(UTC) - timedelta(days=3)).replace(hour=12, minute=0, second=0, microsecond=0)


def event(n: int, **kw: Any) -> dict[str, Any]:
    e = {
        "event_id": f"r{n}",
        "ts": (T0 + timedelta(seconds=n % 7200)).isoformat(),
        "tenant": "acme",
        "model": "llama-test",
        "region": "us-test",
        "traffic_class": "reserved",
        "decision": "admit",
        "estimated_wt": 100,
        "prompt_tokens": 10,
    }
    e.update(kw)
    return e


def person(username: str, *, tenant: Any = None, role: str = "viewer", platform: str | None = None) -> Any:
    from entitlements.models import Membership, PlatformRole
    from tests.factories import UserFactory

    user = UserFactory(username=username)
    if tenant is not None:
        Membership.objects.create(user=user, tenant=tenant, role=role)
    if platform:
        PlatformRole.objects.get_or_create(user=user, role=platform)
    return user


def client_for(user: Any) -> Any:
    from tests.clients import web_client

    return web_client(user)
