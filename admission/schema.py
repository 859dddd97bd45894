"""OpenAPI description of the gateway's token header on the admission endpoints."""

from __future__ import annotations

from entitlements.api.schema import ApiTokenScheme


class GatewayTokenScheme(ApiTokenScheme):
    target_class = "admission.auth.CachedGatewayTokenAuthentication"
    name = "gatewayTokenAuth"
    description = "`Token <key>` of a gateway account (cached in-process for a few seconds)"
