"""Alerts API, mounted under /api/v1/ by config/urls.py."""

from django.urls import path

from alerts import api

urlpatterns = [
    path("alerts", api.AlertRuleList.as_view(), name="api-alerts"),
    path("alerts/<uuid:rule>", api.AlertRuleDetail.as_view(), name="api-alert"),
    path("webhooks", api.WebhookList.as_view(), name="api-webhooks"),
    path("webhooks/<uuid:endpoint>", api.WebhookDetail.as_view(), name="api-webhook"),
]
