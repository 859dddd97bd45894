"""Reservation ids: opaque to gateways, signed and self-describing here (CONTRACT §5, issue 12.3).

An id carries what `complete` needs when the store has forgotten the reservation (a Redis that
restarted without its data, a record past its time): the tenant and request id (so the store
record and the events are found again), the scope and pool it was charged to, the estimate, the
expiry and the source. It is built only from the stored answer and the request's identity, so
the same request always gets the same id, fail-open ones included (those carry expiry "0").

Form: `r1.<base64url(JSON claims)>.<base64url(HMAC-SHA256(key, "r1." + claims)[:16])>`. The key
is ADMISSION_SIGNING_KEY (default: derived from SECRET_KEY); ADMISSION_SIGNING_KEYS_PREVIOUS
lists keys still accepted while a rotation settles (ids live TTL + idempotency time, 25 min).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

PREFIX = "r1."


@dataclass(frozen=True)
class Claims:
    tenant: str
    request_id: str
    scope: tuple[str, str, str, str, str]  # (tenant, project|"", model, region, class) as matched
    pool_id: int
    estimate: str  # exactly as the store answered it (repr of a float)
    expires: str  # Unix seconds as the store answered them; "0": a fail-open admission
    source: str  # entitlement | borrowed | fail_open

    @property
    def fail_open(self) -> bool:
        return self.source == "fail_open"


@lru_cache(maxsize=8)
def _derive(secret: str) -> bytes:
    return hashlib.sha256(b"headroom admission reservation id signing\0" + secret.encode()).digest()


_cached_keys: list[bytes] | None = None  # read once: every reserve signs, and settings reads add up


def _keys() -> list[bytes]:
    global _cached_keys
    if _cached_keys is None:
        current = getattr(settings, "ADMISSION_SIGNING_KEY", "") or ""
        keys = [current.encode() if current else _derive(settings.SECRET_KEY)]
        keys += [k.encode() for k in getattr(settings, "ADMISSION_SIGNING_KEYS_PREVIOUS", ()) or () if k]
        _cached_keys = keys
    return _cached_keys


@receiver(setting_changed)
def _settings_changed(*, setting: str, **_: object) -> None:
    global _cached_keys
    if setting in ("SECRET_KEY", "ADMISSION_SIGNING_KEY", "ADMISSION_SIGNING_KEYS_PREVIOUS"):
        _cached_keys = None


@lru_cache(maxsize=8)
def _record_key(secret: str) -> bytes:
    return hashlib.sha256(b"headroom admission reservation id\0" + secret.encode()).digest()


def record_key() -> bytes:
    """Keys the hash that names a request's store record (services.reservation_id): stable across
    signing-key rotations, so a rotation never moves a reservation's record."""
    return _record_key(settings.SECRET_KEY)


def _b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def _unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


@lru_cache(maxsize=8)
def _keyed(key: bytes) -> hmac.HMAC:
    return hmac.new(key, digestmod=hashlib.sha256)  # the key schedule once; each id copies it


def _mac(key: bytes, body: str) -> bytes:
    m = _keyed(key).copy()
    m.update(body.encode())
    return m.digest()[:16]


def sign(c: Claims) -> str:
    payload = json.dumps([c.tenant, c.request_id, list(c.scope), c.pool_id, c.estimate, c.expires, c.source],
                         separators=(",", ":"), ensure_ascii=True)  # fmt: skip
    body = PREFIX + _b64(payload.encode())
    return body + "." + _b64(_mac(_keys()[0], body))


def verify(token: str) -> Claims | None:
    """The claims of an id signed with the current or a previous key; None for anything else."""
    if not token.startswith(PREFIX) or token.count(".") != 2:
        return None
    body, _, sig = token.rpartition(".")
    try:
        given = _unb64(sig)
        if not any(hmac.compare_digest(given, _mac(k, body)) for k in _keys()):
            return None
        t, r, scope, pool_id, est, exp, source = json.loads(_unb64(body[len(PREFIX) :]))
        return Claims(str(t), str(r), tuple(str(x) for x in scope), int(pool_id), str(est), str(exp), str(source))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return None
