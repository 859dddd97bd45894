"""Content-Security-Policy (issue 29, config/csp.py): every response carries a policy that runs scripts
only from this site's files, and nothing the site serves needs more: no template has an inline
<script> (json_script data blocks are not scripts) or an on*= handler, and the API docs load their
start-up script as a file. tests/portal/test_browser_csp.py checks the pages in Chromium under it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

from config.csp import HEADER
from tests import factories as f

ROOT = Path(__file__).resolve().parents[2]
TAG = re.compile(r"<(script|[a-z][a-z0-9-]*)\b((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>", re.I | re.S)
HANDLER = re.compile(r"""(?:^|\s)on[a-z]+\s*=""", re.I)
SCRIPT_BLOCK = re.compile(r"<script\b((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>(.*?)</script>", re.I | re.S)


def _directives(header: str) -> dict[str, list[str]]:
    out = {}
    for part in header.split(";"):
        name, *values = part.split()
        out[name] = values
    return out


def inline_script_problems(html: str) -> list[str]:
    """What a script-src 'self' policy would refuse in `html`: inline script bodies (a json_script
    block is data, not script), on*= attributes and javascript: URLs."""
    found = []
    for attrs, body in SCRIPT_BLOCK.findall(html):
        is_data = re.search(r"""type\s*=\s*["']application/json["']""", attrs, re.I)
        if not is_data and ("src=" not in attrs or body.strip()):
            found.append(f"inline <script{attrs}>: {body.strip()[:60]!r}")
    for _name, attrs in TAG.findall(html):
        if HANDLER.search(attrs):
            found.append(f"handler attribute in <{_name}{attrs[:80]}>")
    if re.search(r"""(?:href|src|action)\s*=\s*["']\s*javascript:""", html, re.I):
        found.append("a javascript: URL")
    return found


def test_the_checker_sees_what_the_policy_refuses():
    assert inline_script_problems("<script>alert(1)</script>")
    assert inline_script_problems('<button onclick="x()">')
    assert inline_script_problems('<a href="javascript:x()">')
    assert not inline_script_problems('<script src="/static/js/a.js" defer></script>')
    assert not inline_script_problems('<script id="f" type="application/json">{"a": 1}</script>')
    assert not inline_script_problems('<div data-confirm="Delete?" hx-trigger="click">')


def test_no_template_needs_inline_script():
    found = {}
    for path in sorted((ROOT / "templates").rglob("*.html")):
        if problems := inline_script_problems(path.read_text(encoding="utf-8")):
            found[str(path.relative_to(ROOT))] = problems
    assert not found, found


@pytest.mark.django_db
def test_pages_and_api_answers_carry_the_policy():
    c = Client()
    for path in ("/login/", "/api/v1/catalogue/models", "/no-such-page/"):
        resp = c.get(path)
        d = _directives(resp[HEADER])
        assert d["script-src"] == ["'self'"], path  # no 'unsafe-inline', no 'unsafe-eval'
        assert d["object-src"] == ["'none'"] and d["frame-ancestors"] == ["'none'"]
        assert d["base-uri"] == ["'self'"] and d["form-action"] == ["'self'"]


@pytest.mark.django_db
def test_the_api_docs_start_from_a_script_file(fleet):
    c = Client()
    c.force_login(f.member("ann", fleet.acme, "viewer"))
    page = c.get("/api/docs/")
    html = page.content.decode()
    assert page.status_code == 200 and not inline_script_problems(html)
    (script_url,) = re.findall(r'<script src="(/api/docs/\?[^"]*script[^"]*)"', html)
    js = c.get(script_url.replace("&amp;", "&"))
    assert js.status_code == 200 and js["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in js.content.decode()


def test_a_view_that_sets_its_own_policy_keeps_it(rf, settings):
    from django.http import HttpResponse

    from config.csp import ContentSecurityPolicyMiddleware

    def own(request):
        r = HttpResponse("x")
        r[HEADER] = "default-src 'none'"
        return r

    assert ContentSecurityPolicyMiddleware(own)(rf.get("/"))[HEADER] == "default-src 'none'"
    settings.CONTENT_SECURITY_POLICY = {}
    assert HEADER not in ContentSecurityPolicyMiddleware(lambda r: HttpResponse("x"))(rf.get("/"))
