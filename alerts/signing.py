"""Webhook signatures: `X-Headroom-Signature: t=<unix ts>,v1=<hex HMAC-SHA256 of "<ts>.<body>">`.

The timestamp is inside the signed text, so a receiver that rejects old timestamps also rejects
replays of a captured request (the Stripe scheme). `verify` is what a receiver runs.
"""

from __future__ import annotations

import hashlib
import hmac
import time

HEADER = "X-Headroom-Signature"
DEFAULT_TOLERANCE_S = 300


def signature(secret: str, ts: int, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{ts}.".encode() + body, hashlib.sha256)
    return f"t={ts},v1={mac.hexdigest()}"


def verify(
    secret: str, header: str, body: bytes, *, now: float | None = None, tolerance_s: int = DEFAULT_TOLERANCE_S
) -> bool:
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        ts = int(parts["t"])
        given = parts["v1"]
    except (KeyError, ValueError):
        return False
    if abs((time.time() if now is None else now) - ts) > tolerance_s:
        return False
    expected = signature(secret, ts, body).split("v1=", 1)[1]
    return hmac.compare_digest(expected, given)
