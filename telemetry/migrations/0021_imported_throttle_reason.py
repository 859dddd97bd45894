"""Issue 47: the IMPORTED reason code (entitlements.reasons) and the imported throttle rows that had none."""

from django.db import migrations


def forwards(apps, schema_editor):
    from entitlements.reasons import ensure_registry

    ensure_registry(apps.get_model("entitlements", "ReasonCode"), apps.get_model("entitlements", "TrafficClass"))
    for name in ("HourRollup", "DayRollup"):
        apps.get_model("telemetry", name).objects.filter(imported=True, decision="throttle", reason="").update(
            reason="IMPORTED"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0020_rollup_imported"),
        ("entitlements", "0014_spillover"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
