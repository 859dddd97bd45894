"""Every demo page prints numbers people can read (issue 22): no run of more than 7 digits without
separators in the visible text, as the operator and as a tenant viewer.

The demo fleet is loaded, two days of demand history seeded (so request counts run into the millions),
a forecast's pool demand stored for every pool, and one launch request filed, sized and submitted.
"""

from __future__ import annotations

import re
from datetime import timedelta
from html.parser import HTMLParser
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from demo.history import seed_history
from entitlements.models import Entitlement, Pool, Region
from forecasting.models import ForecastRun, PoolDemand
from portal.models import LaunchRequest
from portal.services import intake

LONG_RUN = re.compile(r"\d{8,}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


class _Text(HTMLParser):
    """The text a person sees: no scripts, styles or attribute values."""

    def __init__(self) -> None:
        super().__init__()
        self.skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style", "template"):
            self.skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template") and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def long_numbers(html: str) -> list[str]:
    p = _Text()
    p.feed(html)
    text = " ".join(UUID.sub(" ", " ".join(p.parts)).split())
    return [text[max(0, m.start() - 40) : m.end() + 20].strip() for m in LONG_RUN.finditer(text)]


def test_the_checker_finds_a_long_number_and_ignores_scripts_and_uuids():
    html = "<p>1153156278600 tokens</p><script>var x = 123456789012;</script><code>11111111-2222-3333-4444-555555555555</code>"
    assert long_numbers(html) == ["1153156278600 tokens"]
    hits = long_numbers("<p>1,153,156,278,600 and 1.15 T tokens and 12345678.5</p>")
    assert len(hits) == 1 and hits[0].endswith("12345678.5")


@pytest.fixture
def demo(db):
    call_command("load_demo", stdout=StringIO())
    now = timezone.now()
    seed_history(days=2, now=now)
    run = ForecastRun.objects.create(status="succeeded", progress=100, attempts=1, results_written=1, finished_at=now)
    for i, pool in enumerate(Pool.objects.order_by("slug")):
        # Flat weekly demand around what is sold: some pools short, some covered.
        level = float(pool.breakdown().physical) * (0.5 + 0.25 * (i % 4))
        PoolDemand.objects.create(
            run=run,
            pool=pool,
            start=now,
            tenants={"acme": 1.0},
            hourly={k: [level * f] * (26 * 168) for k, f in (("expected", 1.0), ("upside", 1.3), ("stress", 1.8))},
        )
    requester = get_user_model().objects.get(username="demo-requester")
    ent = Entitlement.objects.select_related("model").filter(tenant__slug="acme").first()
    today = now.date()
    req = intake.launch_request_create(actor=requester, title="Walk launch")
    intake.launch_request_update(
        actor=requester,
        request=req.uuid,
        model=ent.model,
        regions=[Region.objects.get(pk=ent.region_id)],
        launch_date=today + timedelta(days=7),
        end_date=today + timedelta(days=90),
        traffic_class="reserved",
        max_prompt_tokens=4000,
        max_output_tokens=1000,
        prompt_p50=800,
        prompt_p95=3000,
        output_p50=200,
        output_p95=800,
        max_concurrency=64,
        ttft_p99_ms=2000,
        tpot_p99_ms=200,
        committed_basis="wt_per_min",
        committed_value=123_456_789.0,
        expected_basis="rps",
        expected_value=2.0,
        upside_basis="rps",
        upside_value=3.0,
        stress_basis="rps",
        stress_value=4.0,
        justification="walk",
    )
    intake.launch_request_submit(actor=requester, request=req.uuid)
    return req


def _pages(who: str, req: LaunchRequest) -> list[str]:
    ents = [e.uuid for e in Entitlement.objects.filter(tenant__slug="acme")]
    common = ["/", "/sizing/", "/usage/?range=7d", "/usage/", "/alerts/", "/tokens/", f"/launch/{req.uuid}/"]
    common += [f"/entitlements/{u}/" for u in ents] + [f"/entitlements/{u}/statement/" for u in ents]
    if who == "demo-operator":
        pools = [f"/planning/pools/{p.slug}/" for p in Pool.objects.all()]
        return common + ["/launch/queue/", "/fleet/", "/fleet/?range=7d", "/planning/", *pools]
    return common + ["/launch/", "/planning/mine/"]


@pytest.mark.parametrize("who", ["demo-operator", "demo-viewer"])
def test_no_page_prints_a_number_of_more_than_seven_digits_without_separators(demo, who):
    client = Client()
    client.force_login(get_user_model().objects.get(username=who))
    found = {}
    for path in _pages(who, demo):
        response = client.get(path)
        assert response.status_code == 200, path
        if hits := long_numbers(response.content.decode()):
            found[path] = hits
    assert not found, "\n".join(f"{path}: {hits}" for path, hits in found.items())
