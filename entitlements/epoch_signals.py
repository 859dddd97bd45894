"""Access that narrows takes effect on the serving path at once: removing or changing a platform
role or a membership, and deactivating or deleting a user, bump the token-revocation epoch as a
revocation does (entitlements.auth.bump_revocation_epoch), so every process's cached gateway keys
are verified again on their next call instead of after ADMISSION_AUTH_CACHE_S
(docs/serving-path-faults.md). After commit: a process that verifies again in between must already
see the change. A bulk `QuerySet.update()` sends no signal: change access through role_services.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import post_delete, post_save

from entitlements.auth import bump_revocation_epoch
from entitlements.models import Membership, PlatformRole


def _bump(**_: Any) -> None:
    transaction.on_commit(bump_revocation_epoch)


def _user_saved(instance: Any, created: bool, **_: Any) -> None:
    if not created and not instance.is_active:
        transaction.on_commit(bump_revocation_epoch)


def connect() -> None:
    for model in (PlatformRole, Membership):
        name = model.__name__
        post_save.connect(_bump, sender=model, dispatch_uid=f"token-epoch-save-{name}")
        post_delete.connect(_bump, sender=model, dispatch_uid=f"token-epoch-delete-{name}")
    user = get_user_model()
    post_save.connect(_user_saved, sender=user, dispatch_uid="token-epoch-user-save")
    post_delete.connect(_bump, sender=user, dispatch_uid="token-epoch-user-delete")
