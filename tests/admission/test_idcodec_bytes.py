"""Reservation ids are the same bytes however sign() spells its JSON (idcodec.sign writes the array
by hand for speed): ids already handed to gateways stay valid and a replay's id is unchanged."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from admission import idcodec
from admission.idcodec import Claims

KEY = b"k" * 32


def reference(c: Claims, key: bytes) -> str:
    """The id as json.dumps writes its claims (the form ids were signed in before)."""
    payload = json.dumps([c.tenant, c.request_id, list(c.scope), c.pool_id, c.estimate, c.expires, c.source],
                         separators=(",", ":"), ensure_ascii=True)  # fmt: skip
    b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()  # noqa: E731
    body = idcodec.PREFIX + b64(payload.encode())
    return body + "." + b64(hmac.new(key, body.encode(), hashlib.sha256).digest()[:16])


@pytest.mark.parametrize(
    "tenant,request_id,project",
    [
        ("acme", "req-1", ""),
        ("ácmé", 'a "quoted" \\ id', "プロジェクト"),  # non-ASCII escaped, quotes and backslashes escaped
        ("t", "emoji 😀 and \u2028 separators", "p/q"),  # astral code points as surrogate pairs
    ],
)
def test_sign_writes_the_bytes_json_dumps_would(tenant, request_id, project):
    c = Claims(tenant, request_id, (tenant, project, "llama-test", "us-test", "reserved"), 17, "100.0",
               "1796222267.48953", "entitlement")  # fmt: skip
    token = idcodec.sign(c, KEY)
    assert token == reference(c, KEY)
    assert idcodec.verify(token, [KEY]) == c


@pytest.mark.parametrize("key", [b"", b"k", b"k" * 32, b"k" * 64, b"k" * 65, "ключ 🔑".encode() * 20])
def test_the_signature_is_hmac_sha256_for_any_key_length(key):
    """idcodec keeps HMAC's two padded states per key and copies them (RFC 2104 by hand): the same bytes
    as hmac.new for keys shorter than, equal to and longer than SHA-256's 64-byte block (hashed first),
    so ids signed before this change still verify and ids signed now verify on a process without it."""
    c = Claims("acme", "req-1", ("acme", "", "llama-test", "us-test", "reserved"), 17, "100.0", "0", "fail_open")
    token = idcodec.sign(c, key)
    assert token == reference(c, key)
    assert idcodec.verify(token, [b"other", key]) == c
    assert idcodec.verify(token, [key + b"x"]) is None
