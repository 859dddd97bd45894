"""The launch review page shows latency under load for the committed rate on the pool it would go to."""

from __future__ import annotations

import pytest

from entitlements.models import OperatingPoint
from portal.services.intake import launch_request_create, launch_request_submit
from tests import factories as f
from tests.clients import web_client
from tests.figures import figures
from tests.portal.intake.launch_fields import complete_fields


@pytest.fixture
def submitted(fleet):
    requester = f.member("acme-req", fleet.acme, "requester")
    draft = launch_request_create(actor=requester, **complete_fields(fleet))
    return launch_request_submit(actor=requester, request=draft)


def _measure(op: OperatingPoint) -> None:
    """Give the fleet's point a measured Server p99 and an Offline ceiling of the same pair."""
    op.measured_ttft_p99_ms, op.measured_tpot_p99_ms = 800, 120
    op.save()
    f.OperatingPointFactory(
        model=op.model,
        accelerator=op.accelerator,
        runtime=op.runtime,
        scenario="Offline",
        out_tps_per_replica=10_500,
        is_ceiling=True,
        ttft_p99_limit_ms=None,
        tpot_p99_limit_ms=None,
    )
    f.OperatingPointFactory(  # a donor on the same accelerator with two latency points
        model=op.model,
        accelerator=op.accelerator,
        runtime="donor",
        scenario="Interactive",
        out_tps_per_replica=6_000,
        measured_ttft_p99_ms=300,
        measured_tpot_p99_ms=40,
    )
    f.OperatingPointFactory(
        model=op.model,
        accelerator=op.accelerator,
        runtime="donor",
        scenario="Server",
        out_tps_per_replica=10_000,
        measured_ttft_p99_ms=800,
        measured_tpot_p99_ms=120,
    )
    f.OperatingPointFactory(
        model=op.model,
        accelerator=op.accelerator,
        runtime="donor",
        scenario="Offline",
        out_tps_per_replica=10_500,
        is_ceiling=True,
        ttft_p99_limit_ms=None,
        tpot_p99_limit_ms=None,
    )


def test_the_review_page_charts_latency_on_the_chosen_pools_point(fleet, submitted):
    _measure(fleet.pool_a.operating_point)
    approver = f.platform_user("appr1", "approver")
    body = web_client(approver).get(f"/launch/{submitted.uuid}/").content.decode()

    assert "latency-chart" in figures(body)
    assert 'id="slo-breaking-rate"' in body and "today's peak" in body
    assert 'id="latency-borrowed"' in body  # one latency point: the donor's shape, said so


def test_without_measured_p99s_the_review_page_says_why(fleet, submitted):
    approver = f.platform_user("appr1", "approver")
    body = web_client(approver).get(f"/launch/{submitted.uuid}/").content.decode()
    assert 'id="latency-unavailable"' in body
    assert "no measured TTFT and TPOT p99" in body
