"""Signed webhook deliveries: enqueue an event, attempt it, back off, give up.

Each attempt is a row (the delivery log). A 2xx ends it; anything else (another status, a timeout,
a refused connection) schedules the next attempt after base × 2^(attempt−1) seconds (capped),
until the last allowed attempt, which is marked failed. Nothing is retried forever.
Redirects are not followed (a 3xx is a failure): a signed body is for the URL that was configured.
"""

from __future__ import annotations

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


_opener = urllib.request.build_opener(_NoRedirect)


def _refused_address(url: str) -> str | None:
    host = urlsplit(url).hostname or ""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError as exc:
        return f"cannot resolve {host}: {exc}"
    for info in infos:
        ip = ipaddress.ip_address(info[4][0])
        if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast:
            return f"{host} resolves to {ip}, a private address"
    return None


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")  # noqa: S310 - http(s) only, checked
    try:
        with _opener.open(req, timeout=timeout_s()) as resp:
            return resp.status, ""
    except urllib.error.HTTPError as exc:
        return exc.code, (exc.read(300) or b"").decode(errors="replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"


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
    started = time.perf_counter()
    if not ep.enabled:
        error = "endpoint disabled"
    elif urlsplit(ep.url).scheme not in ("http", "https"):
        error = "only http and https URLs are called"
    elif ep.tenant_id is not None and not allow_private() and (refused := _refused_address(ep.url)):
        error = refused
    else:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "Headroom-Webhooks/1",
            "X-Headroom-Event": d.event_type,
            "X-Headroom-Event-Id": str(d.event_id),
            "X-Headroom-Delivery-Attempt": str(d.attempt),
            HEADER: signature(ep.secret, int(time.time()), body),
        }
        code, error = _post(ep.url, body, headers)
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    ok = code is not None and 200 <= code < 300
    last = d.attempt >= max_attempts() or error in ("endpoint disabled", "only http and https URLs are called")
    status = Status.DELIVERED if ok else (Status.FAILED if last else Status.RETRIED)
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
    if not ok:
        log.info("webhook %s to %s attempt %s: %s %s", d.event_id, ep.url, d.attempt, code, error[:120])
    return str(status)


def due_deliveries(*, now: datetime | None = None, limit: int = 100) -> list[int]:
    """Pending attempts whose time has come; attempts stuck in `sending` (a worker died mid-call)
    for longer than any call can take are put back first."""
    now = now or timezone.now()
    stuck = now - timedelta(seconds=timeout_s() * 4 + 60)
    WebhookDelivery.objects.filter(status=Status.SENDING, attempted_at__lt=stuck).update(status=Status.PENDING)
    qs = WebhookDelivery.objects.filter(status=Status.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")
    return list(qs.values_list("pk", flat=True)[:limit])
