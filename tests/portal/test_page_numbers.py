"""Every demo page prints numbers people can read (issue 22): no run of more than 7 digits without
separators in the visible text, as the operator and as a tenant viewer.

And machine text stays off people's pages (issue 28.8, docs/pages.md): on every page × persona
(demo_pages.pages_of) the visible text outside <code> holds no snake_case key, no integer over 9,999
without separators and no number with more than 4 decimals.

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
from tests.portal.demo_pages import PERSONAS, build_demo, pages_of

LONG_RUN = re.compile(r"(?<![\w.])\d{8,}")  # a digit run inside a word (a version, d20250730) is no number
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


class _Text(HTMLParser):
    """The text a person sees: no scripts, styles or attribute values (and, with code=False, no <code>:
    text marked as machine text on purpose, such as an API path or a key prefix)."""

    def __init__(self, code: bool = True) -> None:
        super().__init__()
        self.hidden = ("script", "style", "template") if code else ("script", "style", "template", "code", "pre")
        self.skip = 0
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.hidden:
            self.skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self.hidden and self.skip:
            self.skip -= 1

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def long_numbers(html: str) -> list[str]:
    p = _Text()
    p.feed(html)
    text = " ".join(UUID.sub(" ", " ".join(p.parts)).split())
    return [text[max(0, m.start() - 40) : m.end() + 20].strip() for m in LONG_RUN.finditer(text)]


SNAKE = re.compile(r"(?<![\w./-])[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w/-])")
# Formula symbols the pages define where they use them (README: weights and the latency curve), not keys.
SYMBOLS = {"w_out", "w_cached", "x_inf", "x_sat"}
BIG_INT = re.compile(r"(?<![\w,.])\d{5,}(?![\d,])")
LONG_FLOAT = re.compile(r"\d\.\d{5,}")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")  # a raw ISO timestamp
NO_ZONE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(?::\d\d)?(?! UTC)")  # a time without its zone
# Any other date format: Django's default ("Dec. 16, 2026", "Dec. 2, 2026, 3:03 a.m.") or a slashed one.
OTHER_DATE = re.compile(
    r"\b(?:Jan|Feb|Mar|Apr|May|June?|July?|Aug|Sept?|Oct|Nov|Dec)[a-z]*\.? \d{1,2}, \d{4}|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
)


def machine_text(html: str) -> list[str]:
    p = _Text(code=False)
    p.feed(html)
    text = " ".join(UUID.sub(" ", " ".join(p.parts)).split())
    hits = []
    for pattern in (SNAKE, BIG_INT, LONG_FLOAT, ISO, NO_ZONE, OTHER_DATE):
        hits += [
            text[max(0, m.start() - 30) : m.end() + 15].strip()
            for m in pattern.finditer(text)
            if m.group(0) not in SYMBOLS
        ]
    return hits


def test_the_machine_text_checker_finds_keys_long_integers_and_floats_outside_code():
    assert machine_text("<p>state partially_approved</p>") == ["state partially_approved"]
    assert machine_text("<p>3231899 requests</p>") == ["3231899 requests"]
    assert machine_text("<p>1.789898 / 0.0</p>") == ["1.789898 / 0.0"]
    assert machine_text("<p>from 2026-11-01T00:00:00+00:00</p>") == ["from 2026-11-01T00:00:00+00:00"]
    assert machine_text("<p>at 2026-11-01 10:00 then</p>") == ["at 2026-11-01 10:00 then"]
    assert machine_text("<td>Dec. 16, 2026 → May 31, 2027</td>") == [
        "Dec. 16, 2026 → May 31, 2027",
        "Dec. 16, 2026 → May 31, 2027",
    ]
    assert machine_text("<p>due 12/16/2026</p>") == ["due 12/16/2026"]
    clean = "<p>3,231,899 requests, 1.7899, partially approved, 2026-12-01 14:05 UTC, QUOTA_EXCEEDED, w_out</p>"
    assert machine_text(clean + "<code>cu_hours</code><pre>used_cu 123456</pre>") == []


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


@pytest.fixture
def demo_everything(db):
    return build_demo(everything=True)


def test_no_page_shows_machine_text(demo_everything):
    found = {}
    anonymous = Client().get("/login/")
    if hits := machine_text(anonymous.content.decode()):
        found["anonymous /login/"] = hits
    for who in PERSONAS:
        client = Client()
        client.force_login(get_user_model().objects.get(username=who))
        for path in pages_of(who, demo_everything):
            response = client.get(path)
            assert response.status_code == 200, (who, path)
            if hits := machine_text(response.content.decode()):
                found[f"{who} {path}"] = hits
    assert not found, "\n".join(f"{where}: {hits}" for where, hits in found.items())
