"""OpenAPI description of `Authorization: Token <key>` (entitlements.auth.ApiTokenAuthentication).

drf-spectacular registers an extension when its class is defined; api_urls imports this module,
so the schema knows the scheme whenever the API's URLs are loaded.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "entitlements.auth.ApiTokenAuthentication"
    name = "tokenAuth"
    description = "`Token <key>`; `manage.py create_api_token USERNAME` prints a key"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "apiKey", "in": "header", "name": "Authorization", "description": self.description}
