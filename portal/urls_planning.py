from django.urls import path

from portal.views import planning

urlpatterns = [
    path("", planning.planning, name="planning"),
    path("status/", planning.run_status, name="planning-status"),
    path("runs/", planning.run_now, name="planning-run-now"),
    path("mine/", planning.mine, name="planning-mine"),
]
