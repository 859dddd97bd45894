"""The OIDC tests' one set-up: a real provider process per module and Headroom configured for it, as the
OIDC_* environment would (config/settings.py). test_oidc.py and test_oidc_lockout.py differ only in the
claims the provider hands out and the roles a claim may grant."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from accounts_oidc import conf, discovery
from tests.oidc_provider.server import ProviderServer, new_rsa_key


def running_provider(tmp_path_factory: pytest.TempPathFactory, name: str, claims: dict) -> Iterator[ProviderServer]:
    server = ProviderServer(tmp_path_factory.mktemp(name), claims, new_rsa_key())
    server.start()
    yield server
    server.stop()


def configured(settings: Any, provider: ProviderServer, claims: dict, grantable: set[str]) -> ProviderServer:
    provider.set_claims(claims)
    for name, value in provider.rp_settings().items():
        setattr(settings, name, value)
    settings.OIDC_CLAIM_GRANTABLE_ROLES = frozenset(grantable)
    settings.AUTHENTICATION_BACKENDS = conf.backends(
        settings.AUTHENTICATION_BACKENDS, oidc_enabled=True, local_login=True
    )
    settings.ROOT_URLCONF = "tests.security.oidc_urls"
    discovery.forget()
    return provider
