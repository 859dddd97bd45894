"""Reconciliation pages, mounted at /reconciliation/ by config/urls.py."""

from django.urls import path

from reconciliation import views

urlpatterns = [
    path("", views.queue, name="reconciliation-queue"),
    path("run", views.run_now, name="reconciliation-run"),
    path("<uuid:finding>/", views.detail, name="reconciliation-finding"),
    path("<uuid:finding>/accept", views.act, {"verb": "accept"}, name="reconciliation-accept"),
    path("<uuid:finding>/dismiss", views.act, {"verb": "dismiss"}, name="reconciliation-dismiss"),
    path("<uuid:finding>/amend/", views.amend, name="reconciliation-amend"),
]
