"""A fresh demo opens on the whole product (issue 28.3): after `make run`'s first_forecast, planning
shows an action list and each tenant's planning page its own forecast; a second call changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from demo.fleet import load_demo
from demo.history import seed_history
from entitlements.models import Entitlement
from entitlements.selectors import active_at
from forecasting.models import ForecastRun


def _login(client, username):
    client.force_login(get_user_model().objects.get(username=username))


@pytest.mark.django_db(transaction=True)  # the run starts on commit, as it does outside a test
def test_first_forecast_fills_planning_once(client):
    load_demo()
    seed_history(days=14)  # enough to forecast every demo series; the demo itself seeds 56 days
    _login(client, "demo-operator")
    assert client.get("/planning/").context["actions"] == []  # nothing has run yet

    out = StringIO()
    call_command("first_forecast", stdout=out)
    run = ForecastRun.objects.get()
    assert (run.status, run.progress) == ("succeeded", 100)
    # one series per (tenant, model, region) the seeded history covers: each scope active now
    active = active_at(Entitlement.objects.all(), timezone.now())
    scopes = set(active.values_list("tenant__slug", "model__slug", "region__slug"))
    assert run.series_count == run.series.count() == len(scopes)
    assert out.getvalue().startswith(f"forecast: run {run.pk} succeeded, {run.series_count} series")

    page = client.get("/planning/")
    assert page.context["finished"] == run
    actions = page.context["actions"]
    assert actions and all(a["first"]["order_by"] is not None for a in actions)
    assert "No forecast has run yet" not in page.content.decode()

    _login(client, "demo-viewer")
    mine = client.get("/planning/mine/")
    assert mine.status_code == 200 and mine.context["series"]
    assert {s["tenant"] for s in mine.context["series"]} == {"acme"}

    again = StringIO()
    call_command("first_forecast", stdout=again)
    assert again.getvalue().strip().endswith("already succeeded" + f" ({run.series_count} series), unchanged")
    assert ForecastRun.objects.count() == 1
