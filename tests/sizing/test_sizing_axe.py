"""/sizing/ is axe-clean (issue 48): the empty form, an answer, and a form sent back with errors; axe-core
(tests/vendor/axe-core) finds no WCAG 2.1 A/AA violation in the whole document."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from tests.browser import sign_in
from tests.factories import TenantFactory, member
from tests.sizing.test_latency_answer import measured  # noqa: F401 - the fixture
from tests.sizing.test_latency_browser import AXE
from tests.sizing.test_page import FORM

AXE_DOCUMENT = """async () => {
  const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa']}});
  return r.violations.map(v => v.id + ': ' + v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
}"""
# What axe reported on /sizing/ in the review, checked directly too: every aria-describedby names ids that
# exist, and every radio is labelled, inside a fieldset with a legend, never inside a <label> of another field.
DOM_CHECKS = """() => {
  const out = [];
  for (const el of document.querySelectorAll('[aria-describedby]'))
    for (const id of el.getAttribute('aria-describedby').split(/\\s+/))
      if (!document.getElementById(id)) out.push('aria-describedby to missing #' + id + ' on ' + (el.id || el.tagName));
  for (const r of document.querySelectorAll('input[type=radio]')) {
    if (!r.labels || r.labels.length !== 1) out.push('radio ' + r.id + ' has ' + (r.labels ? r.labels.length : 0) + ' labels');
    const fs = r.closest('fieldset');
    if (!fs || !fs.querySelector('legend')) out.push('radio ' + r.id + ' outside a fieldset with a legend');
    if (r.closest('label') && r.closest('label').parentElement.closest('label')) out.push('radio ' + r.id + ' in nested labels');
  }
  return out;
}"""
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_sizing_page_is_axe_clean_empty_answered_and_with_errors(measured, serial_live_server, browser):  # noqa: F811
    member("axe-ann", TenantFactory(slug="acme"), "requester")
    ctx, page = sign_in(browser, serial_live_server.url, "axe-ann")
    found = {}
    for name, query in (("empty", ""), ("answer", urlencode(FORM)),
                        ("errors", urlencode({**FORM, "arrival_rate_rps": "-1"}))):  # fmt: skip
        page.goto("/sizing/" + (f"?{query}" if query else ""))
        page.evaluate(AXE.read_text(encoding="utf-8"))  # as the driver: the page's CSP refuses an added <script>
        found[name] = page.evaluate(AXE_DOCUMENT) + page.evaluate(DOM_CHECKS)
    ctx.close()
    assert found == {"empty": [], "answer": [], "errors": []}
