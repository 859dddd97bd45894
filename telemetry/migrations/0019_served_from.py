"""Issue 36: an event keeps the pool that served it when it spilled (`served_from`), and the rollups
count spilled traffic per serving pool (the key gains the column, '' on every other row)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0018_eventkey_primary_key"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="dayrollup",
            name="day_rollup_key",
        ),
        migrations.RemoveConstraint(
            model_name="hourrollup",
            name="hour_rollup_key",
        ),
        migrations.RemoveConstraint(
            model_name="minuterollup",
            name="minute_rollup_key",
        ),
        migrations.AddField(
            model_name="admissionevent",
            name="served_from",
            field=models.CharField(
                blank=True,
                help_text="a spilled request: the pool that served it, as admission answered (issue 36)",
                max_length=80,
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="dayrollup",
            name="served_from",
            field=models.CharField(default="", help_text="pool slug of spilled events, '' otherwise", max_length=80),
        ),
        migrations.AddField(
            model_name="hourrollup",
            name="served_from",
            field=models.CharField(default="", help_text="pool slug of spilled events, '' otherwise", max_length=80),
        ),
        migrations.AddField(
            model_name="minuterollup",
            name="served_from",
            field=models.CharField(default="", help_text="pool slug of spilled events, '' otherwise", max_length=80),
        ),
        migrations.AddConstraint(
            model_name="dayrollup",
            constraint=models.UniqueConstraint(
                fields=(
                    "bucket",
                    "tenant",
                    "project",
                    "model",
                    "region",
                    "traffic_class",
                    "entitlement",
                    "decision",
                    "reason",
                    "served_from",
                ),
                name="day_rollup_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="hourrollup",
            constraint=models.UniqueConstraint(
                fields=(
                    "bucket",
                    "tenant",
                    "project",
                    "model",
                    "region",
                    "traffic_class",
                    "entitlement",
                    "decision",
                    "reason",
                    "served_from",
                ),
                name="hour_rollup_key",
            ),
        ),
        migrations.AddConstraint(
            model_name="minuterollup",
            constraint=models.UniqueConstraint(
                fields=(
                    "bucket",
                    "tenant",
                    "project",
                    "model",
                    "region",
                    "traffic_class",
                    "entitlement",
                    "decision",
                    "reason",
                    "served_from",
                ),
                name="minute_rollup_key",
            ),
        ),
    ]
