"""Change counters for the admission snapshot and the triggers that keep them (admission.snapshot_triggers)."""

from django.db import migrations, models


def forward(apps, schema_editor):
    from admission import snapshot_triggers

    snapshot_triggers.install(schema_editor.connection)


def backward(apps, schema_editor):
    from admission import snapshot_triggers

    snapshot_triggers.uninstall(schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("admission", "0002_sweep_schedule"),
        ("entitlements", "0004_access_audit_and_token_scopes"),
        ("telemetry", "0007_dead_letter"),
    ]

    operations = [
        migrations.CreateModel(
            name="SnapshotVersion",
            fields=[
                ("id", models.PositiveSmallIntegerField(primary_key=True, serialize=False)),
                ("entitlements", models.BigIntegerField(default=0)),
                ("supply", models.BigIntegerField(default=0)),
                ("health", models.BigIntegerField(default=0)),
                ("catalogue", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(forward, backward),
    ]
