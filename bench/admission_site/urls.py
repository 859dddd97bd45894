from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from admission.api import ReserveView


@csrf_exempt
def plain(request: HttpRequest) -> JsonResponse:
    """The baseline: a Django JSON view through the same middleware, no auth, no store."""
    return JsonResponse({"decision": "admit", "ok": True})


urlpatterns = [
    path("bench/plain", plain),
    # The reserve view where admission.fast_route does not look: the whole middleware stack down to the
    # view's own fast path, as every reserve went before issue 49.2 (bench/admission.py's third side).
    path("bench/reserve-full-stack", ReserveView.as_view()),
    path("api/v1/", include("admission.api_urls")),
    # What a library-mode gateway reads and writes (bench/admission_modes.py): the snapshot, the events.
    path("api/v1/", include("entitlements.api_urls")),
    path("api/v1/", include("telemetry.api_urls")),
]
