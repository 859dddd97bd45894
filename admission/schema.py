"""OpenAPI description of the gateway's token header on the admission endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class GatewayTokenScheme(OpenApiAuthenticationExtension):
    target_class = "admission.auth.CachedGatewayTokenAuthentication"
    name = "gatewayTokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "apiKey",
            "in": "header",
            "name": "Authorization",
            "description": "`Token <key>` of a gateway account (cached in-process for a few seconds)",
        }
