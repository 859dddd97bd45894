"""The access audit: every change to a platform role or a tenant membership, written by a trigger.

Like the entitlement history, rows come from database triggers (entitlements.history_triggers), so
the admin, a service, a bulk update and raw SQL are all recorded; who and why come from
`entitlements.history.history_context` (none: `actor = null, reason = 'direct SQL'`). The table
is append-only: triggers refuse UPDATE and DELETE on it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class RoleChange(models.Model):
    table_name = models.CharField(max_length=40, help_text="entitlements_platformrole or entitlements_membership")
    row_id = models.BigIntegerField()
    user_id = models.BigIntegerField(db_index=True, help_text="whose access changed")
    op = models.CharField(max_length=8)
    snapshot = models.JSONField(help_text="the row after the change (before it, for a delete)")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, null=True, db_constraint=False, related_name="+"
    )
    reason = models.TextField(blank=True)
    at = models.DateTimeField()

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.op} {self.table_name} of user {self.user_id}"
