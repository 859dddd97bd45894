"""LiteLLM custom auth for the tests (copied next to the test's config.yaml as `test_keys.py`):
the proxy has no database here, so its keys, teams and their metadata come from
TEST_LITELLM_KEYS (JSON: key → UserAPIKeyAuth fields), as a virtual key's row would."""

import json
import os

from fastapi import HTTPException
from litellm.proxy._types import UserAPIKeyAuth

KEYS = json.loads(os.environ.get("TEST_LITELLM_KEYS", "{}"))


async def user_api_key_auth(request, api_key: str) -> UserAPIKeyAuth:
    key = api_key.removeprefix("Bearer ").strip()
    if key not in KEYS:
        raise HTTPException(401, detail="unknown key")
    return UserAPIKeyAuth(api_key=key, **KEYS[key])
