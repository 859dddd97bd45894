"""Signed webhook deliveries: enqueue an event, attempt it, back off, give up.

Each attempt is a row (the delivery log). A 2xx ends it; anything else (another status, a timeout,
a refused connection) schedules the next attempt after base × 2^(attempt−1) seconds (capped),
until the last allowed attempt, which is marked failed. Nothing is retried forever, and what no retry
can change (an address the SSRF guard refuses, a disabled endpoint, another scheme) fails at once.
Redirects are not followed (a 3xx is a failure): a signed body is for the URL that was configured.
A tenant's URL is resolved once, refused unless every address is global, and the connection goes to
that address (SSRF, DNS rebinding); the tenant's log says "refused"/"failed" (docs/input-limits.md).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import logging
import socket
import time
import urllib.error
import urllib.request
import uuid
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from alerts.models import WebhookDelivery, WebhookEndpoint
from alerts.signing import HEADER, signature

log = logging.getLogger(__name__)
Status = WebhookDelivery.Status


def max_attempts() -> int:
    return settings.ALERTS_WEBHOOK_MAX_ATTEMPTS


def backoff(attempt: int) -> timedelta:
    """Delay after failed attempt number `attempt` (1-based): 30 s, 60 s, 120 s, … capped at 1 h."""
    base = settings.ALERTS_WEBHOOK_BACKOFF_BASE_S
    return timedelta(seconds=min(3600.0, base * 2 ** (attempt - 1)))


def timeout_s() -> float:
    return settings.ALERTS_WEBHOOK_TIMEOUT_S


def allow_private() -> bool:
    # Tenants configure URLs; without this guard a tenant could make the server call its own
    # network (SSRF). Development and tests point webhooks at 127.0.0.1 and turn it on.
    return settings.ALERTS_WEBHOOK_ALLOW_PRIVATE


def body_of(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def webhook_event_enqueue(
    *, endpoints: list[WebhookEndpoint], event_type: str, data: dict[str, Any]
) -> list[WebhookDelivery]:
    """First attempts for one event, one per endpoint; sent after the transaction commits."""
    if not endpoints:
        return []
    now = timezone.now()
    event_id = uuid.uuid4()
    payload = {"id": str(event_id), "type": event_type, "created_at": now.isoformat(), "data": data}
    rows = WebhookDelivery.objects.bulk_create(
        [
            WebhookDelivery(endpoint=e, event_id=event_id, event_type=event_type, payload=payload, next_attempt_at=now)
            for e in endpoints
        ]
    )
    ids = [r.pk for r in rows]

    def send() -> None:
        from alerts.tasks import deliver_webhook  # tasks import this module

        for pk in ids:
            deliver_webhook.delay(pk)

    transaction.on_commit(send)
    return rows


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


PRIVATE = "a private address"


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to the address resolved and checked once, whatever DNS says by now (no rebinding
    window between the check and the connection); Host stays the URL's."""

    pinned: str = ""

    def connect(self) -> None:
        self.sock = socket.create_connection((self.pinned, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    pinned: str = ""

    def connect(self) -> None:
        sock = socket.create_connection((self.pinned, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]  # the certificate is the host's


def _pinned_opener(ip: str) -> urllib.request.OpenerDirector:
    def conn(cls: type, host: str, **kw: Any) -> http.client.HTTPConnection:
        c = cls(host, **kw)
        c.pinned = ip
        return c

    class HTTP(urllib.request.HTTPHandler):
        def http_open(self, req: Any) -> Any:
            return self.do_open(lambda host, **kw: conn(_PinnedHTTPConnection, host, **kw), req)

    class HTTPS(urllib.request.HTTPSHandler):
        def https_open(self, req: Any) -> Any:
            return self.do_open(lambda host, **kw: conn(_PinnedHTTPSConnection, host, **kw), req,
                                context=self._context)  # type: ignore[attr-defined]  # fmt: skip

    # no proxy from the environment: a proxy would resolve the host again itself
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect, HTTP, HTTPS)


def _resolve(url: str, *, public_only: bool) -> tuple[str | None, str]:
    """(the address to connect to, "") or (None, why not). Resolved once; with `public_only` every
    address the name has must be global (`ipaddress.is_global`: not private, loopback, link-local,
    shared 100.64.0.0/10, reserved, documentation …), so no answer of a rebinding name can slip in."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        infos = socket.getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except (OSError, UnicodeError) as exc:
        return None, f"cannot resolve {host}: {exc}"
    ips = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not ips:
        return None, f"cannot resolve {host}"
    if public_only:
        for ip in ips:
            mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
            if not ip.is_global or ip.is_multicast or (mapped is not None and not mapped.is_global):
                return None, f"{host} resolves to {ip}, {PRIVATE}"
    return str(ips[0]), ""


def _post(url: str, body: bytes, headers: dict[str, str], ip: str) -> tuple[int | None, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only, checked
    try:
        with _pinned_opener(ip).open(req, timeout=timeout_s()) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, (exc.read(300) or b"").decode(errors="replace")
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as exc:
        return None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"


def tenant_visible(error: str, code: int | None, *, refused: bool) -> str:
    """What a tenant's delivery log shows: "refused" or "failed" (with the HTTP status, which is
    their own server's answer), never the connection's error text: "connection refused" against
    "timed out" from a guessed internal host:port would map the network behind the server."""
    if not error and (code is None or 200 <= code < 300):
        return ""
    if refused:
        return "refused: the URL is not a public http(s) address"
    return f"failed: HTTP {code}" if code is not None else "failed: no answer"


def webhook_delivery_attempt(*, delivery_id: int, now: datetime | None = None) -> str:
    """Attempt one due delivery; claimed with a compare-and-swap so a redelivered task sends nothing."""
    now = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(pk=delivery_id, status=Status.PENDING, next_attempt_at__lte=now).update(
        status=Status.SENDING, attempted_at=now
    )
    if not claimed:
        return "skipped"
    d = WebhookDelivery.objects.select_related("endpoint").get(pk=delivery_id)
    ep = d.endpoint
    body = body_of(d.payload)
    code: int | None = None
    ip: str | None = None
    started = time.perf_counter()
    if not ep.enabled:
        error = "endpoint disabled"
    elif urlsplit(ep.url).scheme not in ("http", "https"):
        error = "only http and https URLs are called"
    else:
        ip, error = _resolve(ep.url, public_only=ep.tenant_id is not None and not allow_private())
    refused = error.endswith(PRIVATE)
    if ip is not None:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Headroom-Webhooks/1",
            "X-Headroom-Event": d.event_type,
            "X-Headroom-Event-Id": str(d.event_id),
            "X-Headroom-Delivery-Attempt": str(d.attempt),
            HEADER: signature(ep.secret, int(time.time()), body),
        }
        code, error = _post(ep.url, body, headers, ip)
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    ok = code is not None and 200 <= code < 300
    # A refused address stays refused: no later attempt can pass the guard, so it fails at once.
    final = refused or error in ("endpoint disabled", "only http and https URLs are called")
    last = d.attempt >= max_attempts() or final
    status = Status.DELIVERED if ok else (Status.FAILED if last else Status.RETRIED)
    if not ok:  # the whole story for operators; the row (the tenant's delivery log) says refused or failed
        log.info("webhook %s to %s attempt %s: %s %s", d.event_id, ep.url, d.attempt, code, error[:300])
    if ep.tenant_id is not None and error not in ("endpoint disabled", "only http and https URLs are called"):
        error = tenant_visible(error, code, refused=refused)
    with transaction.atomic():
        WebhookDelivery.objects.filter(pk=d.pk).update(
            status=status,
            status_code=code,
            error=error[:500],
            duration_ms=elapsed_ms,
            delivered_at=now if ok else None,
        )
        if status == Status.RETRIED:
            WebhookDelivery.objects.create(
                endpoint=ep,
                event_id=d.event_id,
                event_type=d.event_type,
                payload=d.payload,
                attempt=d.attempt + 1,
                next_attempt_at=now + backoff(d.attempt),
            )
    return str(status)


def due_deliveries(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Pending attempts whose time has come; attempts stuck in `sending` (a worker died mid-call)
    for longer than any call can take are put back first."""
    now = now or timezone.now()
    stuck = now - timedelta(seconds=timeout_s() * 4 + 60)
    WebhookDelivery.objects.filter(status=Status.SENDING, attempted_at__lt=stuck).update(status=Status.PENDING)
    qs = WebhookDelivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")
    return list(qs.values_list("pk", flat=True)[:limit])
