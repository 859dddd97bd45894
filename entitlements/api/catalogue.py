"""Catalogue endpoints: read-only for every signed-in person (not for gateway-only accounts)."""

from __future__ import annotations

from typing import Any

from django_filters import rest_framework as filters
from rest_framework import serializers, viewsets

from entitlements.models import Accelerator, OperatingPoint, Region, ServedModel
from entitlements.permissions import IsPerson


class ServedModelSerializer(serializers.ModelSerializer):
    class Meta:
        model = ServedModel
        fields = [
            "slug",
            "name",
            "w_out",
            "w_cached",
            "r_wt_per_s",
            "kv_bytes_per_token",
            "context_length",
            "weights_gb",
        ]


class RegionSerializer(serializers.ModelSerializer):
    zones: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        many=True, read_only=True, slug_field="slug"
    )

    class Meta:
        model = Region
        fields = ["slug", "name", "zones"]


class AcceleratorSerializer(serializers.ModelSerializer):
    class Meta:
        model = Accelerator
        exclude = ["id"]


class OperatingPointSerializer(serializers.ModelSerializer):
    model: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(read_only=True, slug_field="slug")
    accelerator: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(read_only=True, slug_field="slug")
    # The CU conversion lives in capacity.units; these two read it through the model's properties.
    goodput_cu_per_replica = serializers.FloatField(source="goodput_cu", read_only=True)
    goodput_explained = serializers.CharField(read_only=True)

    class Meta:
        model = OperatingPoint
        fields = [
            "id",
            "model",
            "accelerator",
            "accelerators_per_replica",
            "runtime",
            "scenario",
            "ttft_p99_limit_ms",
            "tpot_p99_limit_ms",
            "measured_ttft_p99_ms",
            "measured_tpot_p99_ms",
            "out_tps_per_replica",
            "ref_mean_prompt",
            "ref_mean_output",
            "ref_mix_source",
            "is_ceiling",
            "goodput_cu_per_replica",
            "goodput_explained",
            "source",
            "notes",
        ]


class OperatingPointFilter(filters.FilterSet):
    model = filters.CharFilter(field_name="model__slug")
    accelerator = filters.CharFilter(field_name="accelerator__slug")

    class Meta:
        model = OperatingPoint
        fields = ["model", "accelerator", "is_ceiling"]


class _Catalogue(viewsets.ReadOnlyModelViewSet):
    permission_classes = [IsPerson]
    lookup_field = "slug"
    lookup_value_converter = "dotslug"  # http_plumbing.url_converters: dots too


class ServedModelViewSet(_Catalogue):
    queryset = ServedModel.objects.all()
    serializer_class = ServedModelSerializer


class RegionViewSet(_Catalogue):
    queryset = Region.objects.prefetch_related("zones")
    serializer_class = RegionSerializer


class AcceleratorViewSet(_Catalogue):
    queryset = Accelerator.objects.all()
    serializer_class = AcceleratorSerializer


class OperatingPointViewSet(_Catalogue):
    lookup_field = "pk"
    lookup_value_converter = "int"
    queryset = OperatingPoint.objects.select_related("model", "accelerator")
    serializer_class = OperatingPointSerializer
    filterset_class = OperatingPointFilter
