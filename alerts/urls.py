"""Alert pages, mounted at /alerts/ by config/urls.py."""

from django.urls import path

from alerts import views

urlpatterns = [
    path("", views.inbox, name="alerts-inbox"),
    path("<uuid:note>/read", views.mark_read, name="alerts-read"),
    path("read-all", views.mark_all_read, name="alerts-read-all"),
    path("rules/", views.rules, name="alerts-rules"),
    path("rules/<uuid:rule>/toggle", views.rule_toggle, name="alerts-rule-toggle"),
    path("webhooks/", views.webhooks, name="alerts-webhooks"),
    path("webhooks/<uuid:endpoint>/", views.webhook, name="alerts-webhook"),
    path("webhooks/<uuid:endpoint>/test", views.webhook_test, name="alerts-webhook-test"),
]
