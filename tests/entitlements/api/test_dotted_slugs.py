"""Slugs with dots (`llama-3.1-70b-…`) are routed on every detail route (issue 11.6)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import resolve

from entitlements.models import Accelerator, Pool, Region, ServedModel
from tests.clients import api_client


@pytest.fixture
def demo(db):
    call_command("load_demo", stdout=StringIO())


def test_every_demo_pool_and_catalogue_entry_answers_on_its_detail_route(demo):
    from django.contrib.auth import get_user_model

    operator = api_client(get_user_model().objects.get(username="demo-operator"))
    pools = list(Pool.objects.values_list("slug", flat=True))
    models = list(ServedModel.objects.values_list("slug", flat=True))
    assert sum("." in s for s in pools) >= 3 and sum("." in s for s in models) >= 4  # the case at hand
    for slug in pools:
        r = operator.get(f"/api/v1/pools/{slug}")
        assert (r.status_code, r.json()["slug"]) == (200, slug)
        match = resolve(f"/api/v1/admission/pools/{slug}/health")
        assert (match.url_name, match.kwargs) == ("admission-pool-health", {"slug": slug})
    for slug in models:
        r = operator.get(f"/api/v1/catalogue/models/{slug}")
        assert (r.status_code, r.json()["slug"]) == (200, slug)
    for model, url in ((Region, "regions"), (Accelerator, "accelerators")):
        for slug in model.objects.values_list("slug", flat=True):
            assert operator.get(f"/api/v1/catalogue/{url}/{slug}").status_code == 200, slug
    # a dotted slug that does not exist is a 404, not a different route
    assert operator.get("/api/v1/pools/no.such.pool").status_code == 404
