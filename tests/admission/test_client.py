"""The gateway client against a live server, and its fail mode when the portal is unreachable."""

from __future__ import annotations

import pytest

from admission.client import AdmissionClient
from tests.admission.redis_server import free_port
from tests.admission.world import build_world
from tests.factories import UserFactory


@pytest.fixture
def live(transactional_db, live_server, memory_store, sink):
    from tests.factories import build_fleet

    build_world(build_fleet())
    from entitlements import models as m

    user = UserFactory(username="gw-client")
    m.PlatformRole.objects.create(user=user, role="gateway")
    _, key = m.ApiToken.issue(user)
    return AdmissionClient(live_server.url, key, timeout_s=5)


def ask(c: AdmissionClient, cls: str, rid: str, tenant: str = "acme") -> dict:
    return c.reserve(request_id=rid, tenant=tenant, model="llama-test", region="tiny-region", traffic_class=cls,
                     prompt_tokens=200, max_output_tokens=200)  # fmt: skip


def test_reserve_and_complete_over_http_with_keep_alive(live):
    d = ask(live, "reserved", "k1")
    assert (d["decision"], d["source"], d["reserved_wt"]) == ("admit", "entitlement", 1000.0)
    done = live.complete(d["reservation_id"], prompt_tokens=200, output_tokens=50, ttft_ms=100, e2e_ms=1000)
    assert (done["actual_wt"], done["refunded_wt"]) == (400.0, 600.0)
    t = ask(live, "shared", "k2", tenant="initech")
    assert (t["decision"], t["reason"]) == ("throttle", "NOT_ENTITLED")


def test_unreachable_portal_fails_open_for_guaranteed_and_closed_for_best_effort():
    c = AdmissionClient(f"http://127.0.0.1:{free_port()}", "k", timeout_s=0.2)
    for cls in ("reserved", "shared"):
        d = ask(c, cls, f"u-{cls}")
        assert (d["decision"], d["source"]) == ("admit", "fail_open")
        assert c.complete(d["reservation_id"], prompt_tokens=1, output_tokens=1) is None
    assert ask(c, "best_effort", "u-be") == {"decision": "throttle", "reason": "ADMISSION_UNAVAILABLE",
                                             "responsible": "platform", "retry_after_s": 5}  # fmt: skip
