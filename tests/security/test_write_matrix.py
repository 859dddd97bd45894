"""PATCH, PUT and DELETE with a valid body, every route × every persona.

Routes that take these methods are listed in WRITE_PROBES (tests/security/matrix.py) with the
status each persona gets, and the side effect is checked: only the allowed persona changes
anything. Every other route must refuse all three methods from everyone (302/401/403/404/405; a plain page
may answer as it answers GET) and change nothing, so a new write endpoint cannot ship without a row.
"""

from __future__ import annotations

import os

import pytest
from django.test import Client

from admission.models import PoolHealthOverride
from admission.services import set_pool_health
from entitlements.models import ApiToken, Entitlement, Membership, PlatformRole, Pool, Tenant
from portal.models import LaunchRequest
from tests.security.matrix import MATRIX, WRITE_PROBES
from tests.security.routes import all_routes
from tests.security.test_authz_matrix import _client, _url
from tests.security.world import PERSONAS, build_world

PRINT = os.environ.get("HEADROOM_PRINT_MATRIX") == "1"
METHODS = ("PATCH", "PUT", "DELETE")
ROUTES = {r: n for r, n, _ in all_routes() if not r.startswith("admin/")}
REFUSALS = {302, 401, 403, 404, 405}

# A valid body per write route: what the allowed persona would really send.
BODIES: dict[str, dict] = {
    "api/v1/entitlements/<uuid:id>": {"cu": "11", "reason": "matrix"},
    "api/v1/pools/<dotslug:slug>": {"safety_pct": 5},
    "api/v1/launch-requests/<uuid:uuid>": {"title": "matrix"},
    "api/v1/admission/pools/<dotslug:slug>/health": {"replicas_healthy": 3, "replicas_total": 4},
    "api/v1/usd-budgets": {"tenant": "acme", "budget_usd": 100, "reason": "matrix"},
}


def fingerprint() -> tuple:
    """Everything a write through these routes could change."""
    return (
        sorted(Entitlement.objects.values_list("pk", "version", "cu", "revoked_at")),
        sorted(Pool.objects.values_list("pk", "safety_pct", "maintenance_pct", "fragmentation_pct")),
        sorted(LaunchRequest.objects.values_list("pk", "title", "state")),
        PlatformRole.objects.count(),
        Membership.objects.count(),
        ApiToken.objects.count(),
        sorted(PoolHealthOverride.objects.values_list("pool_id", "replicas_healthy", "replicas_total")),
        sorted(Tenant.objects.values_list("pk", "budget_usd")),
    )


def _send(client: Client, method: str, url: str, body: dict):
    return getattr(client, method.lower())(url, body, content_type="application/json")


def test_every_write_probe_is_a_route():
    assert sorted({r for r, _ in WRITE_PROBES} - set(ROUTES)) == []
    assert set(BODIES) == {r for r, _ in WRITE_PROBES}


@pytest.mark.django_db
@pytest.mark.parametrize("route,method", sorted(WRITE_PROBES))
def test_write_statuses_and_side_effects(route, method):
    world = build_world()
    url = _url(route, ROUTES[route], world.kwargs)
    if route.endswith("/health"):  # something for a DELETE to remove
        pool = Pool.objects.get(slug=world.kwargs["slug"])
        set_pool_health(pool=pool, replicas_healthy=2, replicas_total=4, actor=world.users["operator"])
    seen, changed = {}, set()
    for persona in PERSONAS:
        before = fingerprint()
        resp = _send(_client(world.users[persona]), method, url, BODIES[route])
        seen[persona] = resp.status_code
        if fingerprint() != before:
            changed.add(persona)
    if PRINT:
        print(f"\n    ({route!r}, {method!r}): {seen},")
    assert seen == WRITE_PROBES[(route, method)]
    # A 2xx changed something, and nothing else did.
    assert changed == {p for p, s in seen.items() if 200 <= s < 300}


@pytest.mark.django_db
def test_no_other_route_takes_a_write():
    world = build_world()
    before = fingerprint()
    accepted = []
    for route, name in ROUTES.items():
        if route not in MATRIX or any((route, m) in WRITE_PROBES for m in METHODS):
            continue
        url = _url(route, name, world.kwargs)
        for method in METHODS:
            for persona in PERSONAS:
                status = _send(_client(world.users[persona]), method, url, BODIES.get(route, {"x": 1})).status_code
                # Plain Django pages (no require_http_methods) render on any method as on GET:
                # harmless while nothing changes (the fingerprint below), so GET's status is accepted.
                as_get = not route.startswith("api/") and status == MATRIX[route][persona]
                if status not in REFUSALS and not as_get:
                    accepted.append((route, method, persona, status))
    assert accepted == []
    assert fingerprint() == before
