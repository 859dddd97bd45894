"""Reconciliation API, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from reconciliation import api

urlpatterns = [
    path("reconciliation", api.FindingList.as_view(), name="api-reconciliation"),
    path("reconciliation/runs", api.RunRequest.as_view(), name="api-reconciliation-run"),
    path("reconciliation/<uuid:finding>", api.FindingDetail.as_view(), name="api-finding"),
    path("reconciliation/<uuid:finding>/accept", api.FindingAccept.as_view(), name="api-finding-accept"),
    path("reconciliation/<uuid:finding>/dismiss", api.FindingDismiss.as_view(), name="api-finding-dismiss"),
]
