"""Every demo page prints numbers people can read (issue 22): no run of more than 7 digits without
separators in the visible text, as the operator and as a tenant viewer.

The demo fleet is loaded, two days of demand history seeded (so request counts run into the millions),
a forecast's pool demand stored for every pool, and one launch request filed, sized and submitted.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from entitlements.models import Entitlement, Pool
from portal.models import LaunchRequest
from tests.portal.demo_pages import build_demo

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
    return build_demo()


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
