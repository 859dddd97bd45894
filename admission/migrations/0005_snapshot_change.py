"""The snapshot's change log (admission.models.SnapshotChange) and the triggers that append to it:
the entitlement table's counter trigger now also logs each written row's scope (snapshot_triggers)."""

from django.db import migrations, models


def forward(apps, schema_editor):
    from admission import snapshot_triggers

    snapshot_triggers.install(schema_editor.connection)


def noop(apps, schema_editor):
    pass


class Migration(migrations.Migration):
    dependencies = [("admission", "0004_carried_usage")]

    # Reversed, the triggers are put back after the table is dropped: install() then writes the
    # counters-only triggers 0003 made.
    operations = [
        migrations.RunPython(noop, forward),
        migrations.CreateModel(
            name="SnapshotChange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("everything", models.BooleanField(default=False)),
                ("tenant_id", models.BigIntegerField(null=True)),
                ("project_id", models.BigIntegerField(null=True)),
                ("model_id", models.BigIntegerField(null=True)),
                ("region_id", models.BigIntegerField(null=True)),
                ("traffic_class", models.CharField(max_length=16, null=True)),
            ],
        ),
        migrations.RunPython(forward, noop),
    ]
