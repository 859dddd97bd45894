"""Input guards every API request passes, in one place: what no view should have to think about.

- JSON bodies (GuardedJSONParser): a NUL or a lone UTF-16 surrogate (`"\\ud800"`, valid JSON that
  no UTF-8 encoder writes) anywhere (PostgreSQL's text and jsonb refuse both: `unstorable`), an
  integer outside a signed 64-bit column, or a nesting deeper than the parser can follow is a 400
  naming where it is (`events[3].tenant`), before any view or query sees it.
- Query strings (NulQueryMiddleware): a NUL in a parameter is a 400 naming the parameter, since a
  filter would hand it to PostgreSQL and fail there.
- Lists (BoundedLimitOffsetPagination): `?limit` is clamped to MAX_LIMIT (DRF's own rule for a
  limit above the maximum) and an `?offset` beyond MAX_OFFSET is a 400: neither reaches SQL as a
  number past bigint.

Checking every value of a 20,000-event batch in Python would cost ingest a tenth of its time, so
the body is first searched in C for what could be bad (the text `\\u0000` or `\\ud8..`-`\\udf..`, a
run of 19 digits);
only a body with such a hit is walked to find the exact place, or to find it was only text.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.utils.json import strict_constant

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
MAX_LIMIT = 10_000
MAX_OFFSET = 10**9
_MAYBE_BIG = re.compile(r"\d{19}")
_MAYBE_NUL = "\\u0000"
_MAYBE_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # also a valid pair (an emoji): the walk tells them apart

# Text PostgreSQL's text and jsonb cannot hold and no UTF-8 encoder writes: a NUL, a lone UTF-16
# surrogate (json.loads turns a valid pair into one code point, so only a lone half is left here).
# The one rule for "can this string be stored" (docs/input-limits.md).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
NUL_MESSAGE = "must not contain NUL characters"
SURROGATE_MESSAGE = "must not contain a lone UTF-16 surrogate (U+D800-U+DFFF)"


def unstorable(value: str) -> str | None:
    """Why `value` cannot be stored (a message naming the character class), or None."""
    m = UNSTORABLE.search(value)
    if m is None:
        return None
    return NUL_MESSAGE if m.group() == "\x00" else SURROGATE_MESSAGE


def escape_unstorable(value: str) -> str:
    """`value` with each NUL and lone surrogate written as its visible JSON escape (`\\u0000`, `\\ud800`):
    for quarantines and logs, which must keep the evidence and must not fail on it."""
    if UNSTORABLE.search(value) is None:
        return value
    return UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


def _where(path: list[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def first_bad_value(data: Any) -> tuple[str, str] | None:
    """(where, why) of the first NUL, lone surrogate or out-of-range integer in parsed JSON, or None."""
    stack: list[tuple[list[Any], Any]] = [([], data)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            why = unstorable(v)
            if why is not None:
                return _where(path), why
        elif isinstance(v, bool):
            continue
        elif isinstance(v, int):
            if not INT_MIN <= v <= INT_MAX:
                return _where(path), "an integer beyond 64 bits"
        elif isinstance(v, dict):
            for k, item in reversed(list(v.items())):
                why = unstorable(k)
                if why is not None:
                    return _where([*path, escape_unstorable(k)]), f"a key {why}"
                stack.append(([*path, k], item))
        elif isinstance(v, list):
            stack.extend(([*path, i], item) for i, item in reversed(list(enumerate(v))))
    return None


class GuardedJSONParser(JSONParser):
    scan_values = True

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            data = json.loads(text, parse_constant=strict_constant)
        except RecursionError:
            raise ValidationError({"body": ["JSON nested too deeply"]}) from None
        except ValueError as exc:  # also UnicodeDecodeError
            raise ParseError(f"JSON parse error - {exc}") from None
        if self.scan_values and (_MAYBE_NUL in text or _MAYBE_SURROGATE.search(text) or _MAYBE_BIG.search(text)):
            bad = first_bad_value(data)
            if bad is not None:
                raise ValidationError({bad[0]: [bad[1]]})
        return data


class BatchJSONParser(GuardedJSONParser):
    """For batch ingest: depth and syntax guarded, values left to the per-item validator.

    docs/contract.md §6 keeps a batch's good events when one is bad, so a NUL or a 20-digit number inside
    one event must become that event's error (the validator names index and field), not a 400 that
    drops the whole batch.
    """

    scan_values = False


def _too_large(request: HttpRequest, size: int | None) -> JsonResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    got = f"{size:,} bytes is" if size is not None else "the body is"
    message = f"{got} over the limit of {limit:,} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE); send it in smaller batches"
    body = {"error": {"code": "too_large", "message": f"body: {message}", "fields": {"body": [message]}}}
    return JsonResponse(body, status=400)


class BodyLimitMiddleware:
    """A JSON body over DATA_UPLOAD_MAX_MEMORY_SIZE under /api/: a JSON 400 naming the limit (Django's own
    answer is its HTML 400 page, which a gateway cannot read). Checked from Content-Length before the
    body is read; a chunked body without one is caught where Django refuses it. Multipart uploads (a
    trace) are bounded by their own limit (TRACE_MAX_BYTES), streamed, so they are left alone here."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path.startswith("/api/") and not (request.content_type or "").startswith("multipart/"):
            try:
                size = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                size = 0
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if limit is not None and size > limit:
                return _too_large(request, size)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        from django.core.exceptions import RequestDataTooBig

        if isinstance(exception, RequestDataTooBig) and request.path.startswith("/api/"):
            return _too_large(request, None)
        return None


class NulQueryMiddleware:
    """A NUL in a query parameter: 400 naming it (JSON under /api/, the portal's 400 page elsewhere)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        qs = request.META.get("QUERY_STRING", "")
        if "%00" in qs or "\x00" in qs:
            name = next((k for k, vs in request.GET.lists() if "\x00" in k or any("\x00" in v for v in vs)), "query")
            name = name.replace("\x00", "\\u0000")
            message = "must not contain NUL characters"
            if request.path.startswith("/api/"):
                fields = {name: [message]}
                body = {"error": {"code": "invalid", "message": f"{name}: {message}", "fields": fields}}
                return JsonResponse(body, status=400)
            from django.core.exceptions import BadRequest

            raise BadRequest(f"{name}: {message}")
        return self.get_response(request)


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_offset(self, request: Request) -> int:
        offset = super().get_offset(request)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"at most {MAX_OFFSET}"]})
        return offset
