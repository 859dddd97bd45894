"""Merge of issue 21's event keys and partitions with issue 17's length histograms and in-flight peak."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0008_length_histograms_inflight"),
        ("telemetry", "0011_storage_schedule"),
    ]

    operations = []
