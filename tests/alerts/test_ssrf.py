"""The webhook SSRF guard (issue 29.4): a tenant's URL is resolved once and refused unless every address
is global (`ipaddress.is_global`: that covers 100.64.0.0/10, where some clouds put metadata), the
connection goes to the address that was checked (no second lookup, no DNS-rebinding window), and the
tenant's delivery log says "refused"/"failed", never the connection's error text."""

from __future__ import annotations

import ipaddress

import pytest

from alerts import webhooks
from alerts.models import WebhookDelivery, WebhookEndpoint
from alerts.webhooks import webhook_event_enqueue
from tests.alerts import receiver

NOT_GLOBAL = [
    "100.64.0.1",  # shared address space (RFC 6598)
    "100.127.255.254",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "127.0.0.1",
    "169.254.169.254",  # link-local metadata
    "0.0.0.0",
    "192.0.2.10",  # documentation
    "198.18.0.1",  # benchmarking
    "224.0.0.1",
    "[::1]",
    "[fc00::1]",
    "[fe80::1]",
    "[::ffff:10.0.0.1]",  # IPv4-mapped private
]


@pytest.fixture(autouse=True)
def _settings(settings):
    settings.ALERTS_WEBHOOK_ALLOW_PRIVATE = False
    settings.ALERTS_WEBHOOK_TIMEOUT_S = 0.5  # were a refused address called after all, fail fast
    settings.ALERTS_WEBHOOK_MAX_ATTEMPTS = 4


@pytest.mark.parametrize("host", NOT_GLOBAL)
def test_every_non_global_address_is_refused(host):
    ip, why = webhooks._resolve(f"http://{host}:8080/hook", public_only=True)
    assert ip is None and why.endswith(webhooks.PRIVATE)


def test_a_global_address_is_the_one_connected_to():
    assert webhooks._resolve("https://93.184.215.14/hook", public_only=True) == ("93.184.215.14", "")


def _answers(monkeypatch, *addresses: str) -> None:
    """The resolver answers a name with these addresses, in this order. A stand-in for DNS only: this
    machine has no name server to hold a name whose second answer is private (a rebinding name's shape)."""
    import socket

    def getaddrinfo(host, port, *args, **kwargs):
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses
        ]

    monkeypatch.setattr(webhooks.socket, "getaddrinfo", getaddrinfo)


@pytest.mark.parametrize("second", ["10.0.0.1", "169.254.169.254", "::ffff:127.0.0.1", "100.64.0.1"])
def test_every_resolved_address_must_be_global_not_only_the_first(monkeypatch, second):
    _answers(monkeypatch, "93.184.215.14", "93.184.215.15", second)
    ip, why = webhooks._resolve("https://hooks.example.com/hook", public_only=True)
    assert ip is None and why == f"hooks.example.com resolves to {ipaddress.ip_address(second)}, {webhooks.PRIVATE}"


def test_a_name_whose_every_address_is_global_connects_to_the_first(monkeypatch):
    _answers(monkeypatch, "93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
    assert webhooks._resolve("https://hooks.example.com/hook", public_only=True) == ("93.184.215.14", "")


@pytest.mark.postgres
@pytest.mark.parametrize("host", ["100.64.0.1", "169.254.169.254", "[::ffff:127.0.0.1]"])
def test_a_tenant_delivery_to_a_non_global_address_is_refused_and_says_only_that(
    fleet, host, django_capture_on_commit_callbacks
):
    ep = WebhookEndpoint.objects.create(tenant=fleet.acme, name="internal", url=f"http://{host}:9/hook")
    with django_capture_on_commit_callbacks(execute=True):
        webhook_event_enqueue(endpoints=[ep], event_type="alert.opened", data={})
    d = WebhookDelivery.objects.get(endpoint=ep, attempt=1)
    # Failed at once, with the reason: no retry can pass the guard (it was retried to the attempt limit).
    assert (d.status, d.status_code, d.error) == ("failed", None, "refused: the URL is not a public http(s) address")
    assert WebhookDelivery.objects.filter(endpoint=ep).count() == 1


def test_the_connection_goes_to_the_pinned_address_not_a_second_lookup():
    """The name does not resolve at all (.invalid): only the pinned address can have been dialled,
    and the request still names the URL's host."""
    rec = receiver.start([204])
    try:
        url = f"http://rebinding.invalid:{rec.server.server_port}/hook"
        code, error = webhooks._post(url, b"{}", {"Content-Type": "application/json"}, "127.0.0.1")
    finally:
        rec.server.shutdown()
        rec.server.server_close()
    assert (code, error) == (204, "")
    assert rec.received[0].headers["Host"] == f"rebinding.invalid:{rec.server.server_port}"


@pytest.mark.parametrize(
    ("error", "code", "refused", "shown"),
    [
        ("ConnectionRefusedError: [Errno 111] Connection refused", None, False, "failed: no answer"),
        ("TimeoutError: timed out", None, False, "failed: no answer"),
        ("<html>internal admin</html>", 500, False, "failed: HTTP 500"),
        ("cannot resolve db.internal: Name or service not known", None, False, "failed: no answer"),
        ("x resolves to 10.0.0.1, a private address", None, True, "refused: the URL is not a public http(s) address"),
    ],
)
def test_the_tenant_sees_refused_or_failed_never_the_reason(error, code, refused, shown):
    assert webhooks.tenant_visible(error, code, refused=refused) == shown
