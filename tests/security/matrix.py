"""The expected table. Personas: anonymous, viewer, requester (acme), approver, operator,
gateway, outsider (a globex requester). Objects in URLs belong to acme. Each row was reviewed:
tenant objects answer 404 to the outsider, platform routes 403 to tenant members, serving-path
routes only the gateway; 405 means the persona passed the permission check for a POST-only route."""

ADMIN_LOGIN = "/admin/login/"
ADMIN_SPECIAL = {"admin/login/": (200, ""), "admin/logout/": (302, "/admin/")}

P = ("anonymous", "viewer", "requester", "approver", "operator", "gateway", "outsider")


def row(*codes: int) -> dict[str, int]:
    return dict(zip(P, codes, strict=True))


# fmt: off
MATRIX: dict[str, dict[str, int]] = {
    #                                                  anon viewer req  appr  oper  gw   outsider
    'api/v1/entitlements/snapshot':                      row(401, 403, 403, 403, 403, 200, 403),
    'api/v1/catalogue/models':                           row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/models/<slug:slug>':               row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/regions':                          row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/regions/<slug:slug>':              row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/accelerators':                     row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/accelerators/<slug:slug>':         row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/operating-points':                 row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/catalogue/operating-points/<int:pk>':        row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/pools':                                      row(401, 403, 403, 200, 200, 403, 403),
    'api/v1/pools/<slug:slug>':                          row(401, 403, 403, 200, 200, 403, 403),
    'api/v1/pools/<slug:slug>/reserves':                 row(401, 403, 403, 405, 405, 403, 403),
    'api/v1/entitlements':                               row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/entitlements/<uuid:id>':                     row(401, 200, 200, 200, 200, 403, 404),
    'api/v1/entitlements/<uuid:id>/revoke':              row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/admission/reserve':                          row(401, 403, 403, 403, 403, 405, 403),
    'api/v1/admission/complete':                         row(401, 403, 403, 403, 403, 405, 403),
    'api/v1/admission/pools/<slug:slug>/health':         row(401, 403, 403, 403, 405, 403, 403),
    'api/v1/telemetry/events':                           row(401, 403, 403, 403, 403, 405, 403),
    'api/v1/telemetry/fleet':                            row(401, 403, 403, 403, 403, 405, 403),
    'api/v1/usage':                                      row(401, 200, 200, 200, 200, 403, 404),
    'api/v1/forecasts':                                  row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/forecasts/runs':                             row(401, 403, 403, 403, 405, 403, 403),
    'api/v1/forecasts/runs/<uuid:run_id>':               row(401, 403, 403, 200, 200, 403, 403),
    'api/v1/supply-gap':                                 row(401, 403, 403, 200, 200, 403, 403),
    'api/v1/cost':                                       row(401, 403, 403, 200, 200, 403, 403),
    'api/v1/launch-requests':                            row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/launch-requests/<uuid:uuid>':                row(401, 200, 200, 200, 200, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/submit':         row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/launch-requests/<uuid:uuid>/approve':        row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/launch-requests/<uuid:uuid>/partially-approve': row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/launch-requests/<uuid:uuid>/reject':         row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/launch-requests/<uuid:uuid>/return':         row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/launch-requests/<uuid:uuid>/withdraw':       row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/sizing':                                     row(401, 405, 405, 405, 405, 403, 405),
    'api/v1/traces':                                     row(401, 200, 200, 200, 200, 403, 200),
    'api/v1/traces/<uuid:trace_id>':                     row(401, 200, 200, 200, 200, 403, 404),
    'api/schema/':                                       row(401, 200, 200, 200, 200, 200, 200),
    'api/docs/':                                         row(401, 200, 200, 200, 200, 200, 200),
    '':                                                  row(302, 200, 200, 200, 200, 403, 200),
    'login/':                                            row(200, 302, 302, 302, 302, 302, 302),
    'logout/':                                           row(405, 405, 405, 405, 405, 405, 405),
    'launch/':                                           row(302, 200, 200, 302, 302, 403, 200),
    'launch/queue/':                                     row(302, 403, 403, 200, 200, 403, 403),
    'launch/new':                                        row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/':                               row(302, 200, 200, 200, 200, 403, 404),
    'launch/<uuid:uuid>/edit':                           row(302, 403, 200, 403, 403, 403, 404),
    'launch/<uuid:uuid>/autosave':                       row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/sizing':                         row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/activity':                       row(302, 200, 200, 200, 200, 403, 404),
    'launch/<uuid:uuid>/submit':                         row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/withdraw':                       row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/approve':                        row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/partially-approve':              row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/reject':                         row(405, 405, 405, 405, 405, 405, 405),
    'launch/<uuid:uuid>/return':                         row(405, 405, 405, 405, 405, 405, 405),
    'sizing/':                                           row(302, 200, 200, 200, 200, 404, 200),
    'fleet/':                                            row(302, 404, 404, 200, 200, 404, 404),
    'entitlements/<uuid:uuid>/':                         row(302, 200, 200, 200, 200, 404, 404),
    'usage/':                                            row(302, 200, 200, 200, 200, 404, 200),
    'usage/export.csv':                                  row(302, 200, 200, 200, 200, 404, 200),
    'metrics':                                           row(200, 200, 200, 200, 200, 200, 200),
    'planning/':                                         row(302, 302, 302, 200, 200, 403, 302),
    'planning/status/':                                  row(302, 403, 403, 200, 200, 403, 403),
    'planning/runs/':                                    row(405, 405, 405, 405, 405, 405, 405),
    'planning/mine/':                                    row(302, 200, 200, 403, 403, 403, 200),
}

# Probed with an empty POST, personas in order; a requester's submit or withdraw moves the draft on,
# so later personas meet a submitted or withdrawn request (409 for the approver where a draft is expected).
POST_PROBES: dict[str, dict[str, int]] = {
    'api/v1/admission/complete':                         row(401, 403, 403, 403, 403, 400, 403),
    'api/v1/admission/pools/<slug:slug>/health':         row(401, 403, 403, 403, 400, 403, 403),
    'api/v1/admission/reserve':                          row(401, 403, 403, 403, 403, 400, 403),
    'api/v1/entitlements':                               row(401, 403, 403, 403, 400, 403, 403),
    'api/v1/entitlements/<uuid:id>/revoke':              row(401, 403, 403, 403, 400, 403, 404),
    'api/v1/forecasts/runs':                             row(401, 403, 403, 403, 202, 403, 403),
    'api/v1/launch-requests':                            row(401, 403, 201, 403, 403, 403, 201),
    'api/v1/launch-requests/<uuid:uuid>/approve':        row(401, 403, 403, 409, 403, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/partially-approve': row(401, 403, 403, 400, 403, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/reject':         row(401, 403, 403, 409, 403, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/return':         row(401, 403, 403, 409, 403, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/submit':         row(401, 403, 200, 403, 403, 403, 404),
    'api/v1/launch-requests/<uuid:uuid>/withdraw':       row(401, 403, 200, 403, 403, 403, 404),
    'api/v1/pools/<slug:slug>/reserves':                 row(401, 403, 403, 403, 400, 403, 403),
    'api/v1/sizing':                                     row(401, 400, 400, 400, 400, 403, 400),
    'api/v1/telemetry/events':                           row(401, 403, 403, 403, 403, 400, 403),
    'api/v1/telemetry/fleet':                            row(401, 403, 403, 403, 403, 400, 403),
    'launch/<uuid:uuid>/approve':                        row(302, 403, 403, 409, 403, 403, 404),
    'launch/<uuid:uuid>/autosave':                       row(302, 403, 200, 403, 403, 403, 404),
    'launch/<uuid:uuid>/partially-approve':              row(302, 403, 403, 409, 403, 403, 404),
    'launch/<uuid:uuid>/reject':                         row(302, 403, 403, 409, 403, 403, 404),
    'launch/<uuid:uuid>/return':                         row(302, 403, 403, 409, 403, 403, 404),
    'launch/<uuid:uuid>/sizing':                         row(302, 200, 200, 200, 200, 403, 404),
    'launch/<uuid:uuid>/submit':                         row(302, 403, 302, 403, 403, 403, 404),
    'launch/<uuid:uuid>/withdraw':                       row(302, 403, 302, 403, 403, 403, 404),
    'launch/new':                                        row(302, 403, 302, 403, 403, 403, 302),
    'logout/':                                           row(302, 302, 302, 302, 302, 302, 302),
    'planning/runs/':                                    row(302, 403, 403, 403, 302, 403, 403),
}
# fmt: on
