"""Serializer fields the API shares.

`NumberField`: DRF's FloatField reads `true` as 1.0 (it calls float() on whatever came); a JSON boolean
is not a number, so it is refused naming the field, as a string or a list is."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class NumberField(serializers.FloatField):
    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return float(super().to_internal_value(data))
