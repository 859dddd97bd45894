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
