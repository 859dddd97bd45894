"""Every portal page route in one table, grouped by the views module that serves it.

URL names and paths are part of the contract (tests/portal walks them); change neither here.
"""

from django.contrib.auth import views as auth_views
from django.urls import path

from portal.views import favicon, finance, home, intake, live, planning, sizing, statement, tokens

urlpatterns = [
    # home (portal/views/home.py)
    path("", home.home, name="home"),
    path("login/", home.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    # /favicon.ico (portal/views/favicon.py): the portal's icon, so config/urls.py names no view of an app
    path("favicon.ico", favicon.favicon, name="favicon"),
    # launch intake (portal/views/intake.py)
    path("launch/", intake.request_list, name="intake-list"),
    path("launch/queue/", intake.queue, name="intake-queue"),
    path("launch/new", intake.request_create, name="intake-new"),
    path("launch/availability", intake.availability_rows, name="intake-availability"),
    path("launch/<uuid:uuid>/", intake.detail, name="intake-detail"),
    path("launch/<uuid:uuid>/edit", intake.edit, name="intake-edit"),
    path("launch/<uuid:uuid>/autosave", intake.autosave, name="intake-autosave"),
    path("launch/<uuid:uuid>/sizing", intake.sizing, name="intake-sizing"),
    path("launch/<uuid:uuid>/activity", intake.activity, name="intake-activity"),
    path("launch/<uuid:uuid>/submit", intake.submit, name="intake-submit"),
    path("launch/<uuid:uuid>/withdraw", intake.withdraw, name="intake-withdraw"),
    path("launch/<uuid:uuid>/delete", intake.delete, name="intake-delete"),
    path("launch/<uuid:uuid>/approve", intake.approve, name="intake-approve"),
    path(
        "launch/<uuid:uuid>/partially-approve",
        intake.partially_approve,
        name="intake-partially-approve",
    ),
    path("launch/<uuid:uuid>/reject", intake.reject, name="intake-reject"),
    path("launch/<uuid:uuid>/return", intake.return_, name="intake-return"),
    # sizing calculator (portal/views/sizing.py)
    path("sizing/", sizing.calculator, name="sizing"),
    path("sizing/traces/", sizing.trace_upload, name="sizing-trace-upload"),
    # live pages (portal/views/live.py, statement.py)
    path("fleet/", live.fleet, name="live-fleet"),
    path("entitlements/<uuid:uuid>/", live.entitlement, name="live-entitlement"),
    path("entitlements/<uuid:uuid>/statement/", statement.page, name="entitlement-statement-page"),
    path("entitlements/<uuid:uuid>/statement.csv", statement.export, name="entitlement-statement-csv"),
    path("usage/", live.usage, name="live-usage"),
    path("usage/export.csv", live.usage_export, name="live-usage-export"),
    # capacity planning (portal/views/planning.py)
    path("planning/", planning.planning, name="planning"),
    path("planning/status/", planning.run_status, name="planning-status"),
    path("planning/runs/", planning.run_now, name="planning-run-now"),
    path("planning/mine/", planning.mine, name="planning-mine"),
    path("planning/pools/<str:slug>/", planning.pool, name="planning-pool"),
    # charges for finance (portal/views/finance.py, docs/contract.md §10)
    path("finance/", finance.finance, name="finance"),
    # self-service API tokens (portal/views/tokens.py)
    path("tokens/", tokens.tokens, name="tokens"),
    path("tokens/revoke", tokens.revoke, name="tokens-revoke"),
]
