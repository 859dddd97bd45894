"""The invalid-token counter (http_plumbing.throttles): one atomic increment per failure, a cache
outage blocks nothing, and an exhausted address still reaches with a key verified before, by this
process or another (a guess still gets a 429 without a lookup)."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings
from django.core.cache import cache
from django.test import RequestFactory
from django.utils import timezone
from rest_framework.test import APIClient

from entitlements.models import ApiToken
from http_plumbing import throttles
from http_plumbing.throttles import InvalidTokenThrottle
from tests import factories as f
from tests.servers.redis import RedisServer

LIMIT = int(settings.INVALID_TOKEN_RATE.split("/")[0])


@pytest.fixture
def redis_cache(tmp_path, settings):
    server = RedisServer(tmp_path)
    server.start()
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": server.url}}
    yield server
    server.stop()


@pytest.mark.redis
def test_concurrent_failures_each_count_once(redis_cache):
    request = RequestFactory().get("/", REMOTE_ADDR="10.8.0.1")
    n, threads = 40, 8
    go = threading.Barrier(threads)

    def fail() -> None:
        go.wait()
        for _ in range(n // threads):
            InvalidTokenThrottle().record_failure(request)

    ts = [threading.Thread(target=fail) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    key = InvalidTokenThrottle().get_cache_key(request, None)
    got = cache.get(key)
    assert (len(got) if isinstance(got, list) else got) == n  # a read-modify-write loses some of 40 racing ones


@pytest.mark.redis
def test_a_cache_outage_blocks_nothing(redis_cache, fleet):
    owner = f.member("ann", fleet.acme, "viewer")
    _, key = ApiToken.issue(owner)
    redis_cache.kill()
    c = APIClient(REMOTE_ADDR="10.8.0.2")
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION="Token wrong").status_code == 401
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200


def test_an_exhausted_address_keeps_a_key_verified_before(fleet):
    cache.clear()
    owner = f.member("ann", fleet.acme, "viewer")
    _, known = ApiToken.issue(owner)
    _, unseen = ApiToken.issue(owner)
    c = APIClient(REMOTE_ADDR="10.8.0.3")
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {known}").status_code == 200
    for i in range(LIMIT):  # a misconfigured neighbour behind the same address
        assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token wrong-{i}").status_code == 401
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION="Token wrong-again").status_code == 429
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {known}").status_code == 200
    # A key never verified here is not looked up: no oracle for a guesser.
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {unseen}").status_code == 429


@pytest.mark.redis
def test_an_exhausted_address_keeps_a_key_another_process_verified(redis_cache, fleet, monkeypatch):
    """Each gunicorn worker is its own process: a key verified by one is known to the others and to a
    worker started since, through the shared cache (the in-process record alone refused it)."""
    owner = f.member("ann", fleet.acme, "viewer")
    token, known = ApiToken.issue(owner)
    _, unseen = ApiToken.issue(owner)
    c = APIClient(REMOTE_ADDR="10.8.0.4")
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {known}").status_code == 200
    monkeypatch.setattr(throttles, "_known_good", {})  # another worker, or this one restarted
    for i in range(LIMIT):
        assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token wrong-{i}").status_code == 401
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION="Token wrong-again").status_code == 429
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {known}").status_code == 200
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {unseen}").status_code == 429
    # A revoked key that was verified before gets past the block and is refused by its lookup.
    token.revoked_at = timezone.now()
    token.save(update_fields=["revoked_at"])
    assert c.get("/api/v1/catalogue/models", HTTP_AUTHORIZATION=f"Token {known}").status_code == 401


def test_attempts_overlapping_their_lookups_get_no_more_than_the_limit(fleet, monkeypatch):
    """Each guess's lookup still running when the next one arrives (nested here, so the overlap is
    exact, not timed): counting after the lookup let every one pass the check before any failure
    landed (26 lookups for a limit of 20); counting first allows exactly the limit."""
    from entitlements import auth

    cache.clear()
    real_lookup = auth.lookup
    lookups: list[str] = []
    statuses: list[int] = []
    tries = LIMIT + 6

    def authenticate(i: int) -> None:
        request = RequestFactory().get("/", REMOTE_ADDR="10.8.0.5", HTTP_AUTHORIZATION=f"Token guess-{i}")
        try:
            auth.ApiTokenAuthentication().authenticate(request)
        except auth.exceptions.Throttled:
            statuses.append(429)
        except auth.exceptions.AuthenticationFailed:
            statuses.append(401)

    def overlapping_lookup(key: str) -> ApiToken:
        lookups.append(key)
        i = len(lookups)
        if i + len(statuses) < tries:
            authenticate(i)  # the next guess arrives while this one is being looked up
        return real_lookup(key)

    monkeypatch.setattr(auth, "lookup", overlapping_lookup)
    authenticate(0)
    while len(statuses) < tries:  # guesses after the nest is unwound, one at a time
        authenticate(len(statuses) + 100)
    assert len(lookups) == LIMIT
    assert sorted(statuses) == [401] * LIMIT + [429] * (tries - LIMIT)
