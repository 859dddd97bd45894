from django.urls import include, path
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.validation import validate_schema


def test_this_apps_schema_generates_without_warnings_and_validates():
    GENERATOR_STATS.reset()
    generator = SchemaGenerator(patterns=[path("api/v1/", include("entitlements.api_urls"))])
    schema = generator.get_schema(request=None, public=True)
    assert dict(GENERATOR_STATS._warn_cache) == {}
    assert dict(GENERATOR_STATS._error_cache) == {}
    validate_schema(schema)
    assert sorted(schema["paths"]) == [
        "/api/v1/catalogue/accelerators",
        "/api/v1/catalogue/accelerators/{slug}",
        "/api/v1/catalogue/models",
        "/api/v1/catalogue/models/{slug}",
        "/api/v1/catalogue/operating-points",
        "/api/v1/catalogue/operating-points/{id}",
        "/api/v1/catalogue/regions",
        "/api/v1/catalogue/regions/{slug}",
        "/api/v1/entitlements",
        "/api/v1/entitlements/snapshot",
        "/api/v1/entitlements/{id}",
        "/api/v1/entitlements/{id}/revoke",
        "/api/v1/pools",
        "/api/v1/pools/{slug}",
        "/api/v1/pools/{slug}/move-scope",
        "/api/v1/pools/{slug}/reserves",
        "/api/v1/prices",
    ]
    assert schema["components"]["securitySchemes"]["tokenAuth"]["name"] == "Authorization"


def test_docs_page_is_served_to_signed_in_people(client_for):
    response = client_for("member").get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
