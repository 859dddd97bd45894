"""Issue 38: a webhook that answers with a redirect is not followed (SSRF: a tenant's URL must not
steer the server elsewhere, and a signed body is for the URL configured). Mutation M5 swaps in
urllib's redirect-following opener; this test fails under it."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from alerts.models import WebhookDelivery, WebhookEndpoint
from alerts.webhooks import webhook_event_enqueue


@pytest.fixture
def redirector():
    """POST /hook → 302 to /elsewhere on the same server; every request's method and path kept."""
    seen: list[tuple[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append((self.command, self.path))
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.path == "/hook":
                self.send_response(302)
                self.send_header("Location", "/elsewhere")
            else:
                self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _answer  # noqa: N815 - http.server's names

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", seen
    server.shutdown()
    server.server_close()


def test_a_redirect_is_a_failed_attempt_and_its_target_is_never_called(
    fleet, redirector, settings, django_capture_on_commit_callbacks
):
    settings.ALERTS_WEBHOOK_ALLOW_PRIVATE = True  # the server is on 127.0.0.1
    settings.ALERTS_WEBHOOK_MAX_ATTEMPTS = 3
    url, seen = redirector
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="acme pager", url=url)
    with django_capture_on_commit_callbacks(execute=True):
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={"summary": "s"})
    assert seen == [("POST", "/hook")]  # /elsewhere never asked
    rows = list(
        WebhookDelivery.objects.filter(endpoint=ep).order_by("attempt").values_list("attempt", "status", "status_code")
    )
    assert rows == [(1, "retried", 302), (2, "pending", None)]
