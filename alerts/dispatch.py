"""One way out for every message (alerts and launch-request decisions): an inbox row per person,
then email and webhooks after the transaction commits.

Email is sent by a Celery task scheduled with `transaction.on_commit`, so no mail leaves for a
write that rolled back and no request waits on an SMTP server. Webhook deliveries are rows written
in the same transaction; their first attempt is scheduled the same way (see alerts.webhooks).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from alerts.models import Notification, WebhookEndpoint
from alerts.webhooks import webhook_event_enqueue
from entitlements.models import Tenant


@dataclass(frozen=True)
class Message:
    kind: str  # "alert.opened", "launch_request.approved", …: also the webhook event type
    title: str
    body: str = ""
    link: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _unique(people: Iterable[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for p in people:
        if p is not None and p.is_active:
            seen.setdefault(p.pk, p)
    return list(seen.values())


@transaction.atomic
def message_deliver(
    *,
    message: Message,
    people: Iterable[Any],
    email: bool = True,
    email_people: Iterable[Any] | None = None,
    webhooks_of: Tenant | None | bool = False,
    episode: Any = None,
) -> list[Notification]:
    """Inbox rows for `people`; email to `email_people` (default: the same people) when `email`;
    webhooks to the endpoints of `webhooks_of` (a tenant, None for the operators', False for none)."""
    people = _unique(people)
    mail_to = {p.pk for p in _unique(email_people)} if email_people is not None else {p.pk for p in people}
    notes = Notification.objects.bulk_create(
        [
            Notification(
                user=p,
                kind=message.kind,
                title=message.title[:200],
                body=message.body,
                link=message.link[:300],
                episode=episode,
            )
            for p in people
        ]
    )
    ids = [n.pk for n in notes if n.user_id in mail_to and n.user.email]
    if email and ids:
        from alerts.tasks import send_notification_emails  # tasks import this module

        transaction.on_commit(lambda: send_notification_emails.delay(ids))
    if webhooks_of is not False:
        endpoints = WebhookEndpoint.objects.filter(tenant=webhooks_of, enabled=True)
        payload = {"title": message.title, "body": message.body, "link": message.link, **message.data}
        webhook_event_enqueue(endpoints=list(endpoints), event_type=message.kind, data=payload)
    return notes
