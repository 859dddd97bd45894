"""The sizing calculator, mounted at /sizing/ by portal/urls.py."""

from django.urls import path

from portal.views import sizing

urlpatterns = [
    path("", sizing.calculator, name="sizing"),
]
