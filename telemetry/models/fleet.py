"""Fleet samples: one observation of a pool, from a gateway, Prometheus or the simulator."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from entitlements.models import Pool


class FleetSample(models.Model):
    """One observation of a pool. Unique per (pool, ts, source) so overlapping pulls are idempotent."""

    pool = models.ForeignKey(Pool, on_delete=models.CASCADE, related_name="fleet_samples")
    ts = models.DateTimeField()
    source = models.CharField(max_length=64, default="gateway")
    replicas_healthy = models.PositiveIntegerField(null=True, blank=True)
    replicas_total = models.PositiveIntegerField(null=True, blank=True)
    accelerator_util = models.FloatField(null=True, blank=True, help_text="0–1")
    kv_cache_usage = models.FloatField(null=True, blank=True, help_text="0–1")
    requests_running = models.FloatField(null=True, blank=True)
    requests_waiting = models.FloatField(null=True, blank=True)
    # What a Hyperion-style server reports (issue 24, telemetry.prom_presets): served request rate,
    # accelerator memory in use, mean batch queueing wait and mean model inference time.
    throughput_rps = models.FloatField(null=True, blank=True, help_text="requests/s served")
    accelerator_memory = models.FloatField(null=True, blank=True, help_text="0–1 of accelerator memory in use")
    queue_wait_s = models.FloatField(null=True, blank=True, help_text="mean seconds a request waited for a batch")
    latency_s = models.FloatField(null=True, blank=True, help_text="mean seconds of model inference")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "ts", "source"], name="fleet_sample_unique"),
            models.CheckConstraint(
                condition=Q(replicas_healthy__isnull=True)
                | Q(replicas_total__isnull=True)
                | Q(replicas_healthy__lte=models.F("replicas_total")),
                name="fleet_healthy_within_total",
            ),
        ]
        indexes = [models.Index(fields=["pool", "-ts"], name="fleet_pool_ts_desc")]

    def __str__(self) -> str:
        return f"{self.pool_id}@{self.ts:%Y-%m-%d %H:%M:%S} {self.source}"


# A fleet sample's figures, in the order ingest writes them: the one list ingest, the Prometheus pull and
# the newest-sample read name them from. The first six are the pool's state the live pages show.
FLEET_STATE = (
    "replicas_healthy",
    "replicas_total",
    "accelerator_util",
    "kv_cache_usage",
    "requests_running",
    "requests_waiting",
)
FLEET_COLUMNS = (*FLEET_STATE, "throughput_rps", "accelerator_memory", "queue_wait_s", "latency_s")
FLEET_COUNTS = ("replicas_healthy", "replicas_total")  # whole replicas: a pulled value is rounded
