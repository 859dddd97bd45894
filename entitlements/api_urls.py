"""API routes of this app, mounted under /api/v1/ by config/urls.py.

Paths carry no trailing slash, as docs/contract.md §7 writes them. `entitlements/snapshot` comes before
the router's `entitlements/<uuid:id>`, so it can never be read as an entitlement id.
"""

from django.urls import path
from rest_framework.routers import SimpleRouter

from entitlements.api.catalogue import AcceleratorViewSet, OperatingPointViewSet, RegionViewSet, ServedModelViewSet
from entitlements.api.entitlements import EntitlementViewSet
from entitlements.api.pools import PoolViewSet
from entitlements.api.prices import PriceListView
from entitlements.api.schema import ApiTokenScheme  # noqa: F401  (registers the token scheme)
from entitlements.api.snapshot_view import SnapshotView
from http_plumbing.url_converters import DottedSlugConverter  # noqa: F401  (registers <dotslug:…>)

router = SimpleRouter(trailing_slash="", use_regex_path=False)  # type: ignore[arg-type]  # DRF takes the string
router.register("catalogue/models", ServedModelViewSet, basename="catalogue-model")
router.register("catalogue/regions", RegionViewSet, basename="catalogue-region")
router.register("catalogue/accelerators", AcceleratorViewSet, basename="catalogue-accelerator")
router.register("catalogue/operating-points", OperatingPointViewSet, basename="catalogue-operating-point")
router.register("pools", PoolViewSet, basename="pool")
router.register("entitlements", EntitlementViewSet, basename="entitlement")

urlpatterns = [
    path("entitlements/snapshot", SnapshotView.as_view(), name="entitlement-snapshot"),
    path("prices", PriceListView.as_view(), name="price-list"),
    *router.urls,
]
