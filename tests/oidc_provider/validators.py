from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from oauth2_provider.oauth2_validators import OAuth2Validator


class ClaimsFromFile(OAuth2Validator):
    """ID token and userinfo claims: the test's JSON file, read afresh each time (no scope filtering)."""

    oidc_claim_scope = None

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        with open(settings.CLAIMS_FILE) as f:
            claims = json.load(f).get(request.user.username, {})
        return {"preferred_username": request.user.username, **claims}
