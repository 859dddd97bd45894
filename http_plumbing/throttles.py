"""Throttling of invalid API tokens, keyed by the client's address (brute force of keys).

An attempt is counted before its key is looked up (`take`: concurrent guesses cannot all pass one
check before any failure lands) and given back when the key checks out, so only failures stay
counted and a gateway with a good key is never slowed by its own traffic. Once an address has
INVALID_TOKEN_RATE failures in the window (from its first attempt), a token it presents
is refused with a 429 without being looked up, so a guess cannot be confirmed by a different answer,
unless that very key was verified within KNOWN_GOOD_S (`known_good`: a guesser cannot present one, and
a gateway behind the same address as a misconfigured client keeps working). A verified key is
remembered in this process and in the shared cache, so every web process and one started since
knows it. The count is one
atomic INCR in the Django cache (Redis in production, so all web processes share it); a cache that
is down counts nothing and blocks nothing (docs/serving-path-faults.md): a cache outage must not
refuse every token. The address is REMOTE_ADDR, or
the one NUM_PROXIES hops back in X-Forwarded-For behind a proxy: a client cannot pick its own.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.throttling import SimpleRateThrottle


def client_address(request: Any) -> str:
    """REMOTE_ADDR, or with NUM_PROXIES trusted proxies in front the address the nearest one saw.
    Shared by django-axes (sign-in) and the token throttle, so both key on the same address."""
    meta = getattr(request, "META", {})
    proxies = settings.NUM_PROXIES
    forwarded = [a.strip() for a in meta.get("HTTP_X_FORWARDED_FOR", "").split(",") if a.strip()]
    if proxies and forwarded:
        return forwarded[-min(proxies, len(forwarded))]
    return str(meta.get("REMOTE_ADDR", ""))


log = logging.getLogger(__name__)

KNOWN_GOOD_S = 3600.0
MAX_KNOWN_GOOD = 10_000
_known_good: dict[str, float] = {}  # key hash → verified until (time.monotonic())
_known_lock = threading.Lock()


def _good_key(key_hash: str) -> str:
    return f"throttle_invalid_token_good_{key_hash}"


def remember_good(key_hash: str) -> None:
    """A key verified now. Written to the shared cache once per KNOWN_GOOD_S per process, not per request."""
    now = time.monotonic()
    if _known_good.get(key_hash, 0.0) > now + KNOWN_GOOD_S / 2:
        return
    with _known_lock:
        if len(_known_good) >= MAX_KNOWN_GOOD:
            _known_good.clear()
        _known_good[key_hash] = now + KNOWN_GOOD_S
    try:
        cache.set(_good_key(key_hash), 1, KNOWN_GOOD_S)
    except Exception:  # noqa: BLE001  (any cache backend's error: the key is still known here)
        log.warning("token throttle: cache unavailable, verified key kept in this process only", exc_info=True)


def known_here(key_hash: str) -> bool:
    """Verified within KNOWN_GOOD_S by this process (no cache round trip)."""
    return _known_good.get(key_hash, 0.0) > time.monotonic()


def known_good(key_hash: str) -> bool:
    """Verified within KNOWN_GOOD_S by this process or another. Asked only for an exhausted address."""
    if known_here(key_hash):
        return True
    try:
        return cache.get(_good_key(key_hash)) is not None
    except Exception:  # noqa: BLE001
        log.warning("token throttle: cache unavailable, key not known here", exc_info=True)
        return False


class InvalidTokenThrottle(SimpleRateThrottle):
    scope = "invalid_token"
    # Set from the rate by SimpleRateThrottle.__init__ (parse_rate); the stubs do not declare them.
    num_requests: int
    duration: int

    def get_ident(self, request: Any) -> str:
        return client_address(request)

    def get_rate(self) -> str:
        return settings.INVALID_TOKEN_RATE

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def take(self, request: Any) -> float | None:
        """Count this attempt before its key is looked up; seconds to wait when it is over the limit,
        else None (also when the cache is down). Counting after the lookup let concurrent guesses all
        pass one check before any failure landed (26 lookups for a limit of 20); one atomic increment
        first admits exactly the limit. A key that checks out gives its count back (`give_back`)."""
        key = self.get_cache_key(request, None)
        try:
            self.cache.add(key + ":since", self.timer(), self.duration)  # the window opens at its first attempt
            self.cache.add(key, 0, self.duration)
            try:
                count = int(self.cache.incr(key))
            except ValueError:  # the window lapsed between the two calls: this attempt opens the next
                self.cache.add(key, 1, self.duration)
                count = 1
            if count <= self.num_requests:
                return None
            since = float(self.cache.get(key + ":since") or self.timer())
        except Exception:  # noqa: BLE001  (any cache backend's error: Redis down, timeout)
            log.warning("token throttle: cache unavailable, not blocking", exc_info=True)
            return None
        return max(1.0, self.duration - (self.timer() - since))

    def give_back(self, request: Any) -> None:
        """A taken attempt whose key checked out: only failures stay counted, so a good key never
        slows its own address."""
        try:
            self.cache.decr(self.get_cache_key(request, None))
        except ValueError:  # the window lapsed meanwhile: nothing left to give back
            pass
        except Exception:  # noqa: BLE001
            log.warning("token throttle: cache unavailable, attempt not given back", exc_info=True)

    def record_failure(self, request: Any) -> None:
        """A failure not taken before (a key verified before that no longer checks out). One atomic
        increment: concurrent failures each count (no read-modify-write)."""
        key = self.get_cache_key(request, None)
        try:
            self.cache.add(key + ":since", self.timer(), self.duration)  # the window opens at its first failure
            self.cache.add(key, 0, self.duration)
            try:
                self.cache.incr(key)
            except ValueError:  # the window lapsed between the two calls: this failure opens the next
                self.cache.add(key, 1, self.duration)
        except Exception:  # noqa: BLE001
            log.warning("token throttle: cache unavailable, failure not counted", exc_info=True)
