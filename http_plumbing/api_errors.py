"""Uniform API errors: `{"error": {"code", "message", "fields": {name: [messages]}}}`.

DRF's field dict is kept under `fields` so every 400 names the field it is about.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_handler


def _flatten(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {k: _flatten(v) for k, v in detail.items()}
    if isinstance(detail, list):
        return [_flatten(v) for v in detail]
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    # A service error may say it is a conflict with the current state (409), not bad input.
    conflict = getattr(exc, "http_status", None) == status.HTTP_409_CONFLICT
    if isinstance(exc, DataError | OverflowError):
        # A value the database (or SQLite's driver) cannot hold: bad input, not a fault of ours. The
        # guards (http_plumbing.api_guards) and serializers name the field first; this is the net.
        exc = exceptions.ValidationError({"non_field_errors": ["a value is out of range for its field"]})
    if isinstance(exc, DjangoValidationError):
        fields = exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        exc = exceptions.ValidationError(fields)
    response = drf_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    body: dict[str, Any] = {"code": getattr(exc, "default_code", "error")}
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(detail if isinstance(detail, dict) else {"non_field_errors": detail})
        body["code"] = "invalid"
        body["fields"] = fields
        first = next(iter(fields.items()), None)
        body["message"] = (
            f"{first[0]}: {first[1][0] if isinstance(first[1], list) and first[1] else first[1]}"
            if first
            else "invalid input"
        )
        response.status_code = status.HTTP_400_BAD_REQUEST
        if conflict:
            body["code"], response.status_code = "conflict", status.HTTP_409_CONFLICT
    else:
        body["message"] = str(detail.get("detail", detail)) if isinstance(detail, dict) else str(detail)
    response.data = {"error": body}
    return response
