"""`manage.py create_api_token USERNAME [--name NAME]`: print a new API token key once.

Only the key's hash is stored, so this output is the one chance to copy it.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from entitlements.models import ApiToken


class Command(BaseCommand):
    help = "Issue an API token for USERNAME and print its key (use as `Authorization: Token <key>`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="default", help="a label to tell tokens apart (default: default)")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named '{username}'")
        if not user.is_active:
            raise CommandError(f"user '{username}' is inactive; a token for it would be refused")
        _, key = ApiToken.issue(user, name=name)
        self.stdout.write(key)
