"""The provider's WSGI app. Loading it prepares the database: migrations, the users (one per key of the
claims file, password OIDC_PROVIDER_PASSWORD) and the relying party's client (id, secret, redirect URI)."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.oidc_provider.settings")

from django.core.wsgi import get_wsgi_application  # noqa: E402

application = get_wsgi_application()


def _prepare() -> None:
    import json

    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from oauth2_provider.models import Application

    call_command("migrate", verbosity=0, interactive=False)
    with open(settings.CLAIMS_FILE) as f:
        names = list(json.load(f))
    users = get_user_model().objects
    for name in names + os.environ.get("OIDC_PROVIDER_EXTRA_USERS", "").split():
        if not users.filter(username=name).exists():
            users.create_user(name, password=os.environ["OIDC_PROVIDER_PASSWORD"])
    Application.objects.get_or_create(
        client_id=os.environ["OIDC_PROVIDER_CLIENT_ID"],
        defaults={
            "name": "headroom",
            "client_secret": os.environ["OIDC_PROVIDER_CLIENT_SECRET"],
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": os.environ["OIDC_PROVIDER_REDIRECT_URIS"],
            "algorithm": Application.RS256_ALGORITHM,
            "skip_authorization": True,
        },
    )


_prepare()
