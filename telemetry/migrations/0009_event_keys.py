"""Dedup moves from the events table to EventKey (issue 21): the events table is about to be partitioned
by day, and a unique index on a partitioned table must contain the partition key (ts)."""

from django.db import migrations, models

KEY_TS_INDEX = "telemetry_eventkey_ts"


def ts_index(apps, schema_editor):
    # Retention deletes keys by ts. PostgreSQL: BRIN (keys arrive roughly in ts order; a few pages,
    # nothing per insert to speak of). SQLite: a plain index.
    using = "USING brin " if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"CREATE INDEX {KEY_TS_INDEX} ON telemetry_eventkey {using}(ts)")


def drop_ts_index(apps, schema_editor):
    schema_editor.execute(f"DROP INDEX {KEY_TS_INDEX}")


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0007_dead_letter")]

    operations = [
        migrations.CreateModel(
            name="EventKey",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("source", models.CharField(max_length=64)),
                ("event_id", models.CharField(max_length=160)),
                ("ts", models.DateTimeField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("source", "event_id"), name="event_key_unique_per_source")
                ],
            },
        ),
        migrations.RunSQL(
            "INSERT INTO telemetry_eventkey (source, event_id, ts) "
            "SELECT source, event_id, ts FROM telemetry_admissionevent",
            migrations.RunSQL.noop,
        ),
        migrations.RunPython(ts_index, drop_ts_index),
        migrations.RemoveConstraint(model_name="admissionevent", name="event_unique_per_source"),
    ]
