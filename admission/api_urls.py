"""API routes of this app, mounted under /api/v1/ by config/urls.py."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
