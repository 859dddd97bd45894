"""Reservation ids: opaque to gateways, signed and self-describing here (docs/contract.md §5, issue 12.3).

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

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from admission import idcodec
from admission.idcodec import PREFIX, Claims

__all__ = ["PREFIX", "Claims", "record_key", "sign", "verify"]

_cached_keys: list[bytes] | None = None  # read once: every reserve signs, and settings reads add up


def _keys() -> list[bytes]:
    global _cached_keys
    if _cached_keys is None:
        current = settings.ADMISSION_SIGNING_KEY
        keys = [current.encode() if current else idcodec.derive_signing_key(settings.SECRET_KEY)]
        keys += [k.encode() for k in settings.ADMISSION_SIGNING_KEYS_PREVIOUS if k]
        _cached_keys = keys
    return _cached_keys


@receiver(setting_changed)
def _settings_changed(*, setting: str, **_: object) -> None:
    global _cached_keys
    if setting in ("SECRET_KEY", "ADMISSION_SIGNING_KEY", "ADMISSION_SIGNING_KEYS_PREVIOUS"):
        _cached_keys = None


def record_key() -> bytes:
    """Keys the hash that names a request's store record (services.reservation_id): stable across
    signing-key rotations, so a rotation never moves a reservation's record."""
    return idcodec.derive_record_key(settings.SECRET_KEY)


def sign(c: Claims) -> str:
    return idcodec.sign(c, _keys()[0])


def verify(token: str) -> Claims | None:
    """The claims of an id signed with the current or a previous key; None for anything else."""
    return idcodec.verify(token, _keys())
