"""Issue 12.8: a zone reserve names the one pool it protects, of its host's model.

Existing zone reserves get the one other pool of the host's model with replicas in that zone;
a reserve for which there is none or more than one, or that protects a pool of another model,
stands for nothing it can re-land (or for two pools at once) and is removed. The hosts' stored
reserve totals are recomputed. The schema change and the triggers follow in 0009 (PostgreSQL
refuses to alter a table with row changes pending in the same transaction).
"""

from decimal import Decimal

from django.db import migrations
from django.db.models import Sum


def forward(apps, schema_editor):
    Pool = apps.get_model("entitlements", "Pool")
    FailoverReserve = apps.get_model("entitlements", "FailoverReserve")
    for r in FailoverReserve.objects.select_related("host_pool", "protected_pool").order_by("pk"):
        host = r.host_pool
        if r.protected_pool_id is not None:
            if r.protected_pool.model_id != host.model_id:
                r.delete()
            continue
        candidates = list(
            Pool.objects.filter(model_id=host.model_id, zones__zone_id=r.protected_zone_id, zones__replicas__gt=0)
            .exclude(pk=host.pk)
            .distinct()
        )
        if len(candidates) == 1:
            r.protected_pool = candidates[0]
            r.save(update_fields=["protected_pool"])
        else:
            r.delete()
    for pool in Pool.objects.all():
        held = FailoverReserve.objects.filter(host_pool=pool).aggregate(s=Sum("cu"))["s"] or Decimal(0)
        Pool.objects.filter(pk=pool.pk).update(reserve_held_cu=held)


class Migration(migrations.Migration):
    dependencies = [("entitlements", "0007_catalogue_compute_specs")]
    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
