"""Email for inbox rows: one message per distinct (title, body), addressed to every recipient of it.

Rows are claimed (emailed_at set) before sending so a redelivered task sends nothing twice; a
failed send gives the claim back so the task's retry sends it.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from alerts.models import Notification

log = logging.getLogger(__name__)


class MailFailed(Exception):
    pass


def _link(path: str) -> str:
    base = settings.HEADROOM_BASE_URL
    return f"{base.rstrip('/')}{path}" if base and path.startswith("/") else path


def notification_emails_send(*, notification_ids: list[int]) -> int:
    now = timezone.now()
    Notification.objects.filter(pk__in=notification_ids, emailed_at__isnull=True).update(emailed_at=now)
    rows = Notification.objects.filter(pk__in=notification_ids, emailed_at=now).select_related("user").order_by("pk")
    groups: dict[tuple[str, str, str], list[Notification]] = {}
    for n in rows:
        groups.setdefault((n.title, n.body, n.link), []).append(n)
    items = list(groups.items())
    for i, ((title, body, link), notes) in enumerate(items):
        to = sorted({n.user.email for n in notes if n.user.email})
        if not to:
            continue
        text = body + (f"\n\n{_link(link)}\n" if link else "\n")
        try:
            send_mail(f"[Headroom] {title}", text, None, to)
        except Exception as exc:  # noqa: BLE001 - any transport error: give back this and the unsent claims
            unsent = [n.pk for _, later in items[i:] for n in later]
            Notification.objects.filter(pk__in=unsent).update(emailed_at=None)
            log.exception("could not email %s", to)
            raise MailFailed(str(exc)) from exc
    return len(items)
