"""Under the embedded default a forecast run asked for on the planning page runs beside the request,
not in it (issue 29, low), and its progress moves chunk by chunk where the status row polls it."""

from __future__ import annotations

import threading

import pytest
from django.utils import timezone

from forecasting import history
from forecasting.models import ForecastRun
from tests.forecasting.helpers import daily_cu, write_demand

WAIT_S = 120  # only a guard against a hang if the run is not in the background: never reached when it is


@pytest.mark.django_db(transaction=True)
def test_run_now_returns_at_once_and_the_status_row_shows_each_chunk(client, fleet, settings, monkeypatch):
    settings.FORECAST_RUN_IN_BACKGROUND = True
    settings.FORECAST_CHUNK_SIZE = 1  # three series: three chunks, one after another
    end = history.floor_hour(timezone.now())
    for i, tenant in enumerate(("acme", "globex", "initech")):
        # three days: enough to forecast (seasonal-naive), too short to backtest, so the run is quick
        write_demand(
            tenant=tenant,
            model="llama-test",
            region="us-test",
            cu=daily_cu(72, base=5, amp=2, noise=0.1, seed=i),
            r=1000,
            end=end,
        )

    arrived, proceed = threading.Semaphore(0), threading.Semaphore(0)
    real = history.demand_series

    def gated(**kw):  # each chunk waits for the test before it reads its series and forecasts them
        arrived.release()
        if not proceed.acquire(timeout=WAIT_S):
            raise RuntimeError("the test never let this chunk go: the run was not in the background")
        return real(**kw)

    monkeypatch.setattr(history, "demand_series", gated)
    client.force_login(fleet.operator)
    response = client.post("/planning/runs/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    run = ForecastRun.objects.get()
    assert run.status in ("queued", "running")  # the request came back before the run did anything

    seen = []
    for _ in range(3):
        assert arrived.acquire(timeout=WAIT_S), ForecastRun.objects.values().get()
        run.refresh_from_db()
        status = client.get("/planning/status/").content.decode()
        seen.append((run.status, run.chunks_done, run.progress, f"chunk {run.chunks_done} of 3" in status))
        proceed.release()
    (worker,) = [t for t in threading.enumerate() if t.name == f"forecast-run-{run.pk}"]
    worker.join(WAIT_S)
    run.refresh_from_db()
    assert seen == [("running", 0, 0, True), ("running", 1, 33, True), ("running", 2, 66, True)]
    assert (run.status, run.progress, run.series_count) == ("succeeded", 100, 3)
    assert 'data-status="succeeded"' in client.get("/planning/status/").content.decode()
