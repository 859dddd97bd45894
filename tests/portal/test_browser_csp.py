"""The pages work under their Content-Security-Policy in Chromium (issue 29, config/csp.py): charts draw,
the calculator's accelerator list follows the model, the launch form's title, Save draft and
Delete draft (with its question) act, the statement prints, and the API docs load, with no
violation reported on any of them; a script or handler injected into a page does not run."""

from __future__ import annotations

from typing import Any

import pytest

from entitlements.models import Entitlement, OperatingPoint
from portal.models import LaunchRequest
from tests.portal.demo_pages import build_demo

# Every violation the page reports, sent to the test through an exposed binding (it outlives navigations).
REPORT = """document.addEventListener('securitypolicyviolation', (e) =>
  window.cspViolation(location.pathname + ': ' + e.violatedDirective + ' ' + (e.blockedURI || 'inline')));
window.print = () => { window.printed = (window.printed || 0) + 1; };"""


@pytest.fixture
def demo(transactional_db: Any) -> Any:
    return build_demo()


def _signed_in(browser: Any, base: str, who: str) -> tuple[Any, Any, list[str]]:
    ctx = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
    violations: list[str] = []
    ctx.expose_function("cspViolation", lambda text: violations.append(text))
    ctx.add_init_script(REPORT)
    page = ctx.new_page()
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto("/login/")
    page.fill("input[name=username]", who)
    page.fill("input[name=password]", "demo")
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return ctx, page, violations


def _goto(page: Any, path: str) -> None:
    response = page.goto(path)
    assert response is not None and response.status == 200, path
    assert "script-src 'self';" in response.headers["content-security-policy"], path


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_operator_pages_work_under_the_policy(browser, serial_live_server, demo):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)  # bounds waiting on a loaded box, not speed
    ctx, page, violations = _signed_in(browser, serial_live_server.url, "demo-operator")
    _goto(page, "/")
    expect(page.locator("[data-figure] .main-svg").first).to_be_attached()  # plotly drew

    _goto(page, "/sizing/")
    model = page.eval_on_selector_all("#id_model option", "os => os.map(o => o.value).filter(Boolean)")[0]
    page.select_option("#id_model", model)
    offered = page.eval_on_selector_all(
        "#id_accelerator option", "os => os.filter(o => !o.hidden && o.value).map(o => o.value)"
    )
    measured = set(OperatingPoint.objects.filter(model__slug=model).values_list("accelerator__slug", flat=True))
    assert offered and set(offered) == measured

    ent = Entitlement.objects.filter(tenant__slug="acme").order_by("pk").first()
    _goto(page, f"/entitlements/{ent.uuid}/statement/")
    page.click("a[data-print]")
    assert page.evaluate("window.printed") == 1

    _goto(page, "/api/docs/")
    expect(page.locator(".swagger-ui .opblock").first).to_be_visible()
    assert violations == []

    # The policy is what stops these: an injected inline script and an injected handler attribute do
    # not run (violations reported). Eval is not tried: code evaluated by the test's driver is exempt.
    ran = page.evaluate("""() => {
      const s = document.createElement('script');
      s.textContent = 'window.injected = true';
      document.body.appendChild(s);
      const b = document.createElement('button');
      b.setAttribute('onclick', 'window.clicked = true');
      document.body.appendChild(b);
      b.click();
      return [window.injected === true, window.clicked === true];
    }""")
    assert ran == [False, False]
    for _ in range(200):  # the reports arrive through the binding after the call returns
        if len(violations) >= 2:
            break
        page.evaluate("() => new Promise((done) => setTimeout(done, 50))")
    assert any("script-src" in v for v in violations), violations
    ctx.close()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_launch_form_works_under_the_policy(browser, serial_live_server, demo):
    from playwright.sync_api import expect

    expect.set_options(timeout=20_000)
    ctx, page, violations = _signed_in(browser, serial_live_server.url, "demo-requester")
    _goto(page, "/launch/new")
    page.locator("#id_title").press_sequentially("CSP launch", delay=20)
    expect(page.locator("#lr-heading")).to_have_text("CSP launch")  # static/js/intake.js
    expect(page.locator("#autosave-status")).to_contain_text("Draft saved")
    page.wait_for_url("**/edit")  # the draft exists: intake.js pointed the form at it
    draft = LaunchRequest.objects.get(title="CSP launch")
    with page.expect_request(lambda r: r.url.endswith(f"/launch/{draft.uuid}/autosave")):
        page.click("#save-draft")  # data-htmx-trigger (static/js/actions.js)

    asked: list[str] = []

    def answer(dialog: Any, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("#delete-draft")
    assert asked == ["Delete this draft?"]
    assert LaunchRequest.objects.filter(pk=draft.pk).exists()  # "Cancel" kept it
    page.once("dialog", lambda d: answer(d, True))
    page.click("#delete-draft")
    page.wait_for_url("**/launch/")
    assert not LaunchRequest.objects.filter(pk=draft.pk).exists()
    assert violations == []
    ctx.close()
