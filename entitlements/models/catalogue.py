"""Catalogue: what can be served, where, on what, and how fast (measured)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q

from capacity.units import ReferenceMix, explain_goodput, replica_goodput_cu


class ServedModel(models.Model):
    """A model as capacity sees it: token weights, R (wt/s per CU), and memory per token."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    w_out = models.FloatField(default=4.0, help_text="weight of one output token")
    w_cached = models.FloatField(default=0.0, help_text="weight of one cached prompt token")
    r_wt_per_s = models.FloatField(help_text="R: weighted tokens per second in one capacity unit")
    kv_bytes_per_token = models.PositiveIntegerField(help_text="KV-cache bytes per token (all layers)")
    context_length = models.PositiveIntegerField()
    weights_gb = models.FloatField(help_text="memory taken by the weights of one replica, GB")
    active_params_b = models.FloatField(
        null=True, blank=True, help_text="parameters active per token, billions (prefill FLOPs = 2 × this per token)"
    )

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(r_wt_per_s__gt=0), name="model_r_positive"),
            models.CheckConstraint(condition=Q(w_out__gte=0) & Q(w_cached__gte=0), name="model_weights_nonneg"),
        ]

    def __str__(self) -> str:
        return self.slug


class Region(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Zone(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    region = models.ForeignKey(Region, on_delete=models.PROTECT, related_name="zones")

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Accelerator(models.Model):
    """One GPU, or one TPU slice type, with the inputs the cost model needs."""

    class Kind(models.TextChoices):
        GPU = "gpu", "GPU"
        TPU = "tpu", "TPU"

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    memory_gb = models.FloatField(help_text="memory per chip, GB")
    chips_per_slice = models.PositiveIntegerField(default=1, help_text="1 for a GPU; chips in one TPU slice")
    dense_tflops_per_chip = models.FloatField(
        null=True, blank=True, help_text="dense (no sparsity) BF16 TFLOP/s per chip: the prefill compute bound"
    )
    # Purchased hardware
    purchase_price_usd = models.FloatField(default=0)
    depreciation_years = models.FloatField(default=4)
    lifetime_utilization = models.FloatField(default=0.8)
    power_watts = models.FloatField(default=700)
    maintenance_pct_per_year = models.FloatField(default=5)
    # Cloud
    cloud_on_demand_per_hour = models.FloatField(default=0)
    cloud_reserved_per_hour = models.FloatField(default=0)
    reserved_term_months = models.PositiveIntegerField(default=12)
    min_billing_minutes = models.PositiveIntegerField(default=1)
    host_cost_per_hour = models.FloatField(default=0, help_text="host share per accelerator, USD/h")
    # The rest of "fully loaded", per accelerator-hour, so cost per token is not just the chip.
    network_cost_per_hour = models.FloatField(default=0, help_text="network fabric share per accelerator, USD/h")
    storage_cost_per_hour = models.FloatField(default=0, help_text="storage (weights, logs) per accelerator, USD/h")
    software_cost_per_hour = models.FloatField(default=0, help_text="licences and support per accelerator, USD/h")
    overhead_basis = models.CharField(
        max_length=200, blank=True, default="", help_text="where the four figures above come from (e.g. an assumption)"
    )
    lead_time_weeks = models.PositiveIntegerField(default=12)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(condition=Q(memory_gb__gt=0), name="accelerator_memory_positive"),
            models.CheckConstraint(
                condition=Q(lifetime_utilization__gt=0) & Q(lifetime_utilization__lte=1),
                name="accelerator_lifetime_util_range",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class OperatingPoint(models.Model):
    """A measured (or published ceiling) throughput of one replica under a latency limit."""

    model = models.ForeignKey(ServedModel, on_delete=models.PROTECT, related_name="operating_points")
    accelerator = models.ForeignKey(Accelerator, on_delete=models.PROTECT, related_name="operating_points")
    accelerators_per_replica = models.PositiveIntegerField()
    runtime = models.CharField(max_length=160)
    scenario = models.CharField(max_length=160)
    ttft_p99_limit_ms = models.FloatField(null=True, blank=True, help_text="empty: no latency bound (ceiling)")
    tpot_p99_limit_ms = models.FloatField(null=True, blank=True)
    measured_ttft_p99_ms = models.FloatField(null=True, blank=True)
    measured_tpot_p99_ms = models.FloatField(null=True, blank=True)
    out_tps_per_replica = models.FloatField(help_text="output tokens/s of one replica at this point")
    instances_per_replica = models.PositiveIntegerField(
        default=1, help_text="copies of the weights one replica holds (each takes weights_gb of its memory)"
    )
    ref_mean_prompt = models.FloatField(help_text="reference mix: mean prompt tokens per request")
    ref_mean_output = models.FloatField(help_text="reference mix: mean output tokens per request")
    ref_mix_source = models.CharField(max_length=300, help_text="where the reference mix comes from")
    is_ceiling = models.BooleanField(default=False, help_text="no latency bound applied: an upper limit, not goodput")
    source = models.URLField(max_length=400)
    notes = models.TextField(blank=True)

    class Meta:
        ordering = ["model__slug", "accelerator__slug", "scenario"]
        constraints = [
            models.CheckConstraint(condition=Q(out_tps_per_replica__gt=0), name="op_tps_positive"),
            models.CheckConstraint(condition=Q(ref_mean_output__gt=0) & Q(ref_mean_prompt__gte=0), name="op_mix_valid"),
            models.UniqueConstraint(
                fields=["model", "accelerator", "accelerators_per_replica", "runtime", "scenario"],
                name="op_unique_measurement",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model.slug} on {self.accelerators_per_replica}× {self.accelerator.slug} ({self.scenario})"

    def clean(self) -> None:
        if self.is_ceiling and (self.ttft_p99_limit_ms or self.tpot_p99_limit_ms):
            raise ValidationError({"is_ceiling": "a ceiling has no latency limit"})

    @property
    def mix(self) -> ReferenceMix:
        return ReferenceMix(mean_prompt=self.ref_mean_prompt, mean_output=self.ref_mean_output)

    @property
    def goodput_cu(self) -> float:
        return replica_goodput_cu(
            out_tps_at_slo=self.out_tps_per_replica,
            mix=self.mix,
            w_out=self.model.w_out,
            r_wt_per_s=self.model.r_wt_per_s,
        )

    @property
    def goodput_explained(self) -> str:
        return explain_goodput(
            out_tps_at_slo=self.out_tps_per_replica,
            mix=self.mix,
            w_out=self.model.w_out,
            r_wt_per_s=self.model.r_wt_per_s,
        )
