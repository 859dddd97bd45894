"""The surface a newcomer meets (issue 11.8): the portal's own error pages in its layout with DEBUG
off, /api/docs/ from local static files only, and a favicon."""

from __future__ import annotations

import re

import pytest
from django.test import Client, RequestFactory

from portal.views.errors import server_error
from tests.clients import web_client
from tests.telemetry.helpers import person

LAYOUT = 'class="topbar"'


@pytest.fixture
def viewer(fleet):
    return web_client(person("viewer", tenant=fleet.acme))


def _is_portal_page(r, status):
    body = r.content.decode()
    assert r.status_code == status
    assert LAYOUT in body and f"<h1>{status} · " in body
    assert "Traceback" not in body and "URLconf" not in body  # none of Django's debug pages


def test_404_is_the_portals_page_not_a_list_of_url_patterns(viewer, settings):
    settings.DEBUG = False
    _is_portal_page(viewer.get("/no/such/page/"), 404)
    _is_portal_page(Client().get("/no/such/page/"), 404)  # signed out too


def test_400_403_and_405_pages(viewer, fleet, settings):
    settings.DEBUG = False
    _is_portal_page(viewer.get("/usage/?range=ac%00me"), 400)  # a NUL in a query parameter
    _is_portal_page(viewer.get("/logout/"), 405)
    assert viewer.get("/logout/")["Allow"] == "POST, OPTIONS"
    from portal.services.intake import launch_request_create

    requester = person("req", tenant=fleet.acme, role="requester")
    req = launch_request_create(actor=requester, title="x")
    _is_portal_page(viewer.get(f"/launch/{req.uuid}/edit"), 403)  # a viewer may read, not edit


def test_500_page_renders_in_the_layout(db):
    request = RequestFactory().get("/boom")
    from django.contrib.auth.models import AnonymousUser

    request.user = AnonymousUser()
    r = server_error(request)
    assert r.status_code == 500 and "<h1>500 · Something broke</h1>" in r.content.decode()


def test_api_docs_load_only_local_static(viewer):
    body = viewer.get("/api/docs/").content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', body)
    assert any("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in s for s in sources), sources
    assert all(s.startswith("/") for s in sources), sources  # nothing from another host: works offline
    assert "cdn" not in body.lower()


def test_favicon_is_linked_and_served(viewer):
    r = viewer.get("/favicon.ico")
    assert (r.status_code, r["Location"]) == (301, "/static/favicon.svg")
    assert '<link rel="icon" href="/static/favicon.svg"' in viewer.get("/").content.decode()
