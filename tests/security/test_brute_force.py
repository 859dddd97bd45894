"""Brute force: sign-in locks per account and per address (django-axes, the production limit), and
invalid API tokens are throttled per address (DRF) before any key is looked up."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

from entitlements.models import ApiToken
from http_plumbing.throttles import InvalidTokenThrottle
from tests import factories as f

LIMIT = settings.AXES_FAILURE_LIMIT  # the real setting, not a test value


@pytest.fixture
def alice(db):
    user = f.UserFactory(username="alice")
    user.set_password("right-password")
    user.save()
    return user


def _sign_in(username: str, password: str, addr: str) -> tuple[int, bool]:
    c = Client(REMOTE_ADDR=addr)
    resp = c.post("/login/", {"username": username, "password": password})
    return resp.status_code, "_auth_user_id" in c.session


def test_the_limit_is_the_production_one():
    assert LIMIT == 5


def test_wrong_passwords_then_the_right_one_is_refused(alice):
    assert _sign_in("alice", "right-password", "10.0.0.1") == (302, True)
    for _ in range(LIMIT):
        assert _sign_in("alice", "guess", "10.0.0.1")[1] is False
    assert _sign_in("alice", "right-password", "10.0.0.1") == (429, False)


def test_per_account_from_many_addresses(alice):
    for i in range(LIMIT):
        _sign_in("alice", "guess", f"10.0.1.{i}")
    assert _sign_in("alice", "right-password", "10.0.2.1") == (429, False)


def test_per_address_across_accounts(alice):
    for i in range(LIMIT):
        _sign_in(f"nobody{i}", "guess", "10.0.3.1")
    assert _sign_in("alice", "right-password", "10.0.3.1") == (429, False)
    assert _sign_in("alice", "right-password", "10.0.3.2") == (302, True)


def test_fewer_failures_than_the_limit_still_sign_in_and_reset(alice):
    for _ in range(LIMIT - 1):
        _sign_in("alice", "guess", "10.0.4.1")
    assert _sign_in("alice", "right-password", "10.0.4.1") == (302, True)
    for _ in range(LIMIT - 1):
        _sign_in("alice", "guess", "10.0.4.1")
    assert _sign_in("alice", "right-password", "10.0.4.1") == (302, True)  # success reset the count


@pytest.fixture
def token_addrs():
    addrs = ["10.9.0.1", "10.9.0.2"]
    keys = [InvalidTokenThrottle.cache_format % {"scope": "invalid_token", "ident": a} for a in addrs]
    cache.delete_many(keys)
    yield addrs
    cache.delete_many(keys)


def test_invalid_tokens_get_429_after_the_limit(fleet, token_addrs, monkeypatch):
    clock = [1_000_000.0]  # the throttle's own clock, held still so Retry-After is exact
    monkeypatch.setattr(InvalidTokenThrottle, "timer", staticmethod(lambda: clock[0]))
    owner = f.member("ann", fleet.acme, "viewer")
    _, key = ApiToken.issue(owner)
    limit = int(settings.INVALID_TOKEN_RATE.split("/")[0])
    bad = APIClient(REMOTE_ADDR=token_addrs[0])
    statuses = [
        bad.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Bearer wrong-{i}").status_code for i in range(limit)
    ]
    assert statuses == [401] * limit
    resp = bad.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION="Token wrong-again")
    assert resp.status_code == 429
    assert resp["Retry-After"] == "60"  # the oldest failure leaves the one-minute window in 60 s
    clock[0] += 45
    # Once over the limit, even a good key from that address is not looked up: no oracle for guesses.
    good = bad.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {key}")
    assert (good.status_code, good["Retry-After"]) == (429, "15")
    other = APIClient(REMOTE_ADDR=token_addrs[1])
    assert other.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_a_forwarded_for_header_does_not_pick_a_new_address(fleet, token_addrs):
    limit = int(settings.INVALID_TOKEN_RATE.split("/")[0])
    c = APIClient(REMOTE_ADDR=token_addrs[0])
    for i in range(limit):
        c.get("/api/v1/pools", HTTP_AUTHORIZATION=f"Token w{i}", HTTP_X_FORWARDED_FOR=f"192.0.2.{i}")
    resp = c.get("/api/v1/pools", HTTP_AUTHORIZATION="Token w", HTTP_X_FORWARDED_FOR="192.0.2.200")
    assert resp.status_code == 429
