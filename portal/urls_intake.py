"""Launch intake pages, mounted at /launch/."""

from django.urls import path

from portal.views import intake as v

urlpatterns = [
    path("", v.request_list, name="intake-list"),
    path("queue/", v.queue, name="intake-queue"),
    path("new", v.request_create, name="intake-new"),
    path("<uuid:uuid>/", v.detail, name="intake-detail"),
    path("<uuid:uuid>/edit", v.edit, name="intake-edit"),
    path("<uuid:uuid>/autosave", v.autosave, name="intake-autosave"),
    path("<uuid:uuid>/sizing", v.sizing, name="intake-sizing"),
    path("<uuid:uuid>/activity", v.activity, name="intake-activity"),
    path("<uuid:uuid>/submit", v.submit, name="intake-submit"),
    path("<uuid:uuid>/withdraw", v.withdraw, name="intake-withdraw"),
    path("<uuid:uuid>/approve", v.approve, name="intake-approve"),
    path("<uuid:uuid>/partially-approve", v.partially_approve, name="intake-partially-approve"),
    path("<uuid:uuid>/reject", v.reject, name="intake-reject"),
    path("<uuid:uuid>/return", v.return_, name="intake-return"),
]
