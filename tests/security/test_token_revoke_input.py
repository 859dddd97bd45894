"""`/tokens/revoke` with a token id that is not plain ASCII digits (issue 29.5): `"²".isdigit()` is true
and `int("²")` raised, a 500. Now it is the same 404 as a token that does not exist, nothing revoked."""

from __future__ import annotations

import pytest

from entitlements.models import ApiToken
from tests.telemetry.helpers import client_for, person


@pytest.mark.parametrize("raw", ["²", "١٢", "9" * 30, "-1", ""])
def test_a_token_id_that_is_not_ascii_digits_is_a_404(fleet, raw):
    user = person("ann", tenant=fleet.acme, role="admin")
    token, _ = ApiToken.issue(user)
    r = client_for(user).post("/tokens/revoke", {"token": raw, "confirm": "yes"})
    assert r.status_code == 404
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None


def test_the_same_person_revokes_a_real_id(fleet):
    user = person("ann", tenant=fleet.acme, role="admin")
    token, _ = ApiToken.issue(user)
    r = client_for(user).post("/tokens/revoke", {"token": str(token.pk), "confirm": "yes"})
    assert r.status_code == 302
    assert ApiToken.objects.get(pk=token.pk).revoked_at is not None
