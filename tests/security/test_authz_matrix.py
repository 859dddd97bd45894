"""Every URL pattern × every kind of person → the status they get.

A route the table does not list fails the test, so a new page, partial or endpoint cannot ship
without someone deciding who may reach it. Pages are also fetched as htmx partials
(`HX-Request: true`). Routes that only accept POST are probed with an empty POST as well, since
GET would answer 405 before any permission check. The outsider is a member of another tenant:
they get 404 for the first tenant's objects. Admin routes follow one rule: everyone but staff
is sent to the admin login; staff reach the index and the change lists they may view.
"""

from __future__ import annotations

import os
import re

import pytest
from django.test import Client

from tests.security.matrix import ADMIN_LOGIN, ADMIN_SPECIAL, MATRIX, POST_PROBES
from tests.security.routes import all_routes
from tests.security.world import PERSONAS, build_world

ROUTES = [r for r in all_routes() if not r[0].startswith("admin/")]
ADMIN_ROUTES = [r for r in all_routes() if r[0].startswith("admin/")]
PRINT = os.environ.get("HEADROOM_PRINT_MATRIX") == "1"


def _url(route: str, name: str | None, kwargs: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        key = m.group(2)
        return kwargs.get(f"{key}:{name}", kwargs.get(key, "x"))

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", sub, route)


def _client(user) -> Client:
    c = Client()
    if user is not None:
        c.force_login(user)
    return c


def test_every_route_has_a_row():
    missing = sorted({r for r, _, _ in ROUTES} - set(MATRIX))
    stale = sorted(set(MATRIX) - {r for r, _, _ in ROUTES})
    assert (missing, stale) == ([], [])


@pytest.mark.django_db
@pytest.mark.parametrize("route,name", [(r, n) for r, n, _ in ROUTES], ids=[r or "/" for r, _, _ in ROUTES])
def test_route_statuses(route, name):
    world = build_world()
    url = _url(route, name, world.kwargs)
    if route == "api/v1/usage":
        url += "?tenant=acme"
    expected = MATRIX.get(route)
    seen = {}
    for persona in PERSONAS:
        c = _client(world.users[persona])
        seen[persona] = c.get(url).status_code
        if not route.startswith("api/") and route != "metrics":
            hx = c.get(url, HTTP_HX_REQUEST="true").status_code
            assert hx == seen[persona], f"{persona} {url}: htmx {hx} vs page {seen[persona]}"
    if PRINT:
        print(f"\n    {route!r}: {seen},")
    assert seen == expected


@pytest.mark.django_db
@pytest.mark.parametrize("route", sorted(POST_PROBES))
def test_post_only_route_statuses(route):
    world = build_world()
    name = next(n for r, n, _ in ROUTES if r == route)
    url = _url(route, name, world.kwargs)
    seen = {}
    for persona in PERSONAS:
        resp = _client(world.users[persona]).post(url, {}, content_type="application/json")
        seen[persona] = resp.status_code
    if PRINT:
        print(f"\n    {route!r}: {seen},")
    assert seen == POST_PROBES[route]


@pytest.mark.django_db
def test_admin_routes_only_for_staff():
    world = build_world()
    kwargs = {"object_id": "1", "app_label": "entitlements"}
    checked = 0
    for route, name, _ in ADMIN_ROUTES:
        url = _url(route, name, kwargs)
        for persona in PERSONAS:
            if persona == "operator":
                continue
            resp = _client(world.users[persona]).get(url)
            # The admin's own login page answers everyone; its logout (GET) sends back to the index.
            status, location = ADMIN_SPECIAL.get(route, (302, ADMIN_LOGIN))
            assert resp.status_code == status, f"{persona} {url}"
            assert (resp.get("Location") or "").startswith(location), f"{persona} {url}"
            checked += 1
    operator = _client(world.users["operator"])
    assert operator.get("/admin/").status_code == 200
    for changelist in ("entitlements/pool/", "entitlements/entitlement/", "entitlements/servedmodel/"):
        assert operator.get(f"/admin/{changelist}").status_code == 200
    assert checked == 6 * len(ADMIN_ROUTES)
