"""Launch-intake API, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from portal.api import availability
from portal.api import views as v
from portal.services import intake

urlpatterns = [
    path("availability", availability.Availability.as_view(), name="api-availability"),
    path("launch-requests", v.LaunchRequestList.as_view(), name="api-launch-requests"),
    path("launch-requests/<uuid:uuid>", v.LaunchRequestDetail.as_view(), name="api-launch-request"),
    path("launch-requests/<uuid:uuid>/submit", v.step(intake.launch_request_submit, with_comment=False).as_view()),
    path("launch-requests/<uuid:uuid>/approve", v.Approve.as_view()),
    path("launch-requests/<uuid:uuid>/partially-approve", v.PartiallyApprove.as_view()),
    path("launch-requests/<uuid:uuid>/reject", v.step(intake.launch_request_reject).as_view()),
    path("launch-requests/<uuid:uuid>/return", v.step(intake.launch_request_return).as_view()),
    path("launch-requests/<uuid:uuid>/withdraw", v.step(intake.launch_request_withdraw).as_view()),
]
