"""Throttling of invalid API tokens, keyed by the client's address (brute force of keys).

Only failures are counted, so a gateway with a good key is never slowed by its own traffic. Once an
address has INVALID_TOKEN_RATE failures in the window, every token it presents is refused with a 429
without being looked up, so a guess cannot be confirmed by a different answer. Counts live in the
Django cache (Redis in production, so all web processes share them). The address is REMOTE_ADDR, or
the one NUM_PROXIES hops back in X-Forwarded-For behind a proxy: a client cannot pick its own.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
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

    def _load(self, request: Any) -> None:
        self.key = self.get_cache_key(request, None)
        self.now = self.timer()
        self.history = [t for t in self.cache.get(self.key, []) if t > self.now - self.duration]

    def _wait(self) -> float:
        return max(1.0, self.duration - (self.now - self.history[-1])) if self.history else float(self.duration)

    def blocked(self, request: Any) -> float | None:
        """Seconds to wait when this address is already over the limit, else None."""
        self._load(request)
        return self._wait() if len(self.history) >= self.num_requests else None

    def record_failure(self, request: Any) -> None:
        self._load(request)
        self.history.insert(0, self.now)
        self.cache.set(self.key, self.history, self.duration)
