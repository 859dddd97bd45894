"""The alerts API's OpenAPI schema: no warnings, valid, exactly these paths."""

from django.urls import include, path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema

import entitlements.api.schema  # noqa: F401 - registers the token scheme, as the full URLconf does


def test_alerts_schema_generates_without_warnings_and_validates():
    GENERATOR_STATS.reset()
    generator = SchemaGenerator(patterns=[path("api/v1/", include("alerts.api_urls"))])
    schema = generator.get_schema(request=None, public=True)
    assert dict(GENERATOR_STATS._warn_cache) == {}
    assert dict(GENERATOR_STATS._error_cache) == {}
    validate_schema(schema)
    assert sorted(schema["paths"]) == [
        "/api/v1/alerts",
        "/api/v1/alerts/{rule}",
        "/api/v1/webhooks",
        "/api/v1/webhooks/{endpoint}",
    ]
