"""Uploaded request traces (sizing replays them)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from entitlements.models import Tenant


class Trace(models.Model):
    """An uploaded request trace; `data` is numpy .npz bytes of arrays arrival_s, prompt, output.

    tenant empty = platform-wide (visible to everyone signed in).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, null=True, blank=True, related_name="traces")
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="traces"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    requests = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(default=0)
    characterisation = models.JSONField(default=dict)
    data = models.BinaryField()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name
