"""Only best_effort borrows (the contract's rule for traffic classes): existing reserved and shared rows lose their borrowing
(limit 0, overage throttle) before the check constraint in 0006 makes it a rule, and the shared
class stops saying it may borrow. The history triggers record each change with the reason below."""

from django.db import migrations

REASON = "migration 0005: only best_effort borrows"


def _set_reason(conn, reason):
    with conn.cursor() as cur:
        if conn.vendor == "postgresql":
            cur.execute("SELECT set_config('headroom.reason', %s, true)", [reason])
        else:
            cur.execute("UPDATE entitlements_historycontext SET actor_id = NULL, reason = %s WHERE id = 1", [reason])


def forward(apps, schema_editor):
    from entitlements.reasons import ensure_registry

    ensure_registry(apps.get_model("entitlements", "ReasonCode"), apps.get_model("entitlements", "TrafficClass"))
    Entitlement = apps.get_model("entitlements", "Entitlement")
    borrowing = Entitlement.objects.exclude(traffic_class_id="best_effort").exclude(
        borrowing_limit_cu=0, overage="throttle"
    )
    if borrowing.exists():
        _set_reason(schema_editor.connection, REASON)
        borrowing.update(borrowing_limit_cu=0, overage="throttle")
        _set_reason(schema_editor.connection, "")


class Migration(migrations.Migration):
    dependencies = [("entitlements", "0004_access_audit_and_token_scopes")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
