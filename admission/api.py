"""The serving-path endpoints (docs/contract.md §5) and the operator's pool-health override.

Kept lean on purpose: the reserve view is benchmarked (bench/admission.py), so it validates by
hand and hands straight to admission.services. A gateway's well-formed call with a token verified
within the cache time skips DRF's request machinery (`_GatewayFastPath`), which cost more than the
reserve itself; everything else (no or unknown token, other roles, bad input, other media types)
takes the DRF path, so every refusal and error reads exactly as before. admission.fast_route asks the
same fast path from the middleware stack, before the session, CSRF and page middleware run.
"""

from __future__ import annotations

import json
from http.cookies import SimpleCookie
from json.encoder import c_make_encoder, encode_basestring, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.http.response import ResponseHeaders
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.compat import LONG_SEPARATORS, SHORT_SEPARATORS
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.utils import encoders
from rest_framework.views import APIView

from admission import services
from admission.auth import CachedGatewayTokenAuthentication, epoch_of, forget, learned, remembered, under_epoch
from admission.backends.base import EpochChanged
from entitlements import roles
from entitlements.models import Pool
from entitlements.permissions import IsGateway, IsOperator
from entitlements.reasons import REASONS

_THROTTLE = inline_serializer(
    "AdmissionThrottle",
    {
        "decision": serializers.CharField(),
        "reason": serializers.ChoiceField(choices=list(REASONS)),
        "responsible": serializers.CharField(),
        "retry_after_s": serializers.IntegerField(allow_null=True),
        # QUOTA_EXCEEDED only: which limit was hit, the token rate or the request rate (issue 23)
        "limit": serializers.ChoiceField(choices=["rate", "rps", "lending", "fair_share", "usd"], required=False),
        # BUDGET_EXHAUSTED on a budget of 0 (an Atlas limit of 0): says so; retry_after_s is then null
        "message": serializers.CharField(required=False),
    },
)


# The serving path: cached token check, no per-request queries.
SERVING_AUTH = [CachedGatewayTokenAuthentication, SessionAuthentication]

_SLOW = object()
# The bytes DRF's JSONRenderer writes for these requests (no indent asked), without its per-call
# media-type parsing: 29 -> 11 us per answer (timeit). Its settings, its encoder, its escapes.
_ENCODER = encoders.JSONEncoder(
    ensure_ascii=not api_settings.UNICODE_JSON, allow_nan=not api_settings.STRICT_JSON,
    separators=SHORT_SEPARATORS if api_settings.COMPACT_JSON else LONG_SEPARATORS,
)  # fmt: skip
# The C encoder JSONEncoder.encode builds on every call (with a fresh circular-reference dict), built
# once: an answer's body is a flat dict this module made, never circular. The same bytes (test_fast_path).
_C_ENCODE = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ENCODER.default, encode_basestring_ascii if _ENCODER.ensure_ascii else encode_basestring,
        _ENCODER.indent, _ENCODER.key_separator, _ENCODER.item_separator, _ENCODER.sort_keys, _ENCODER.skipkeys,
        _ENCODER.allow_nan,
    )
)  # fmt: skip


def _render(body: Any) -> bytes:
    text = _ENCODER.encode(body) if _C_ENCODE is None else "".join(_C_ENCODE(body, 0))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


_JSON_ACCEPT = frozenset({"", "*/*", "application/json"})  # what DRF answers with plain JSON


def _strict(constant: str) -> Any:
    raise ValueError(constant)  # NaN / Infinity: DRF's strict JSON parser refuses them too


# One decoder for every call: json.loads(..., parse_constant=...) builds a new JSONDecoder each time (3.2 -> 1.7 us).
_DECODE = json.JSONDecoder(parse_constant=_strict).decode


class _GatewayFastPath:
    """Serve a gateway's plain JSON POST without DRF's Request, negotiation and Response, when DRF
    would have authenticated it from the token cache, let it through IsGateway, parsed the body
    as JSON and answered in compact JSON. Anything else returns _SLOW and DRF handles it."""

    parse: Any  # services.parse_reserve / parse_complete
    serve: Any  # (parsed request, token epoch) → (status, body, headers)

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        got = self._fast(request)
        return super().dispatch(request, *args, **kwargs) if got is _SLOW else got  # type: ignore[misc]

    def _fast(self, request: HttpRequest) -> Any:
        meta = request.META
        if request.method != "POST" or meta.get("QUERY_STRING") or meta.get("HTTP_ACCEPT", "") not in _JSON_ACCEPT:
            return _SLOW
        if request.content_type != "application/json" or request.content_params.get("charset", "utf-8").lower() not in (  # type: ignore[union-attr]
            "utf-8", "utf8",
        ):  # fmt: skip
            return _SLOW
        who = remembered(meta.get("HTTP_AUTHORIZATION", ""))
        if who is None or roles.GATEWAY not in roles.roles_of(who[0]):
            return _SLOW
        try:
            parsed = self.parse(_DECODE(request.body.decode("utf-8")))
        except (ValueError, ValidationError):
            return _SLOW  # DRF parses again and words the 400 as it always does
        request.user = who[0]
        try:
            status, body, headers = self.serve(parsed, epoch_of(who[1]))
        except EpochChanged as changed:  # verified under an older epoch: DRF verifies the key again
            learned(changed.current)
            forget(who[1])
            return _SLOW
        response = _answer(_render(body), status)
        _set_headers(response, headers)
        return response


# DRF's default response headers, as ResponseHeaders stores them (lower-cased name → (name, value)).
_DRF_HEADERS = {"allow": ("Allow", "POST, OPTIONS"), "vary": ("Vary", "Accept")}
_ANSWER_HEADERS = {"content-type": ("Content-Type", "application/json"), **_DRF_HEADERS}


def _answer(content: bytes, status: int) -> HttpResponse:
    """`HttpResponse(content, status=status, content_type="application/json")` with DRF's two headers, its
    attributes set as HttpResponseBase.__init__ and the content setter set them (the same attributes and
    values: test_fast_path) without their checks, which have nothing to check here: the status is one of
    this module's, the content bytes, the headers literals. 1.3 vs 5.2 µs a call (timeit, issue 49.2)."""
    r: Any = HttpResponse.__new__(HttpResponse)
    h: Any = ResponseHeaders.__new__(ResponseHeaders)
    h._store = _ANSWER_HEADERS.copy()
    r.headers = h
    r._charset = None
    r._resource_closers = []
    r._handler_class = None
    r.cookies = SimpleCookie()
    r.closed = False
    r.status_code = status
    r._reason_phrase = None
    r._container = [content]
    return r


def _set_headers(response: HttpResponse, headers: dict[str, str]) -> None:
    """`response[k] = v` for the answer's headers (_answer has DRF's two already), without ResponseHeaders' per-header
    charset conversion where there is nothing to convert: names are this module's ASCII literals and
    the values printable ASCII (numbers, a pool's slug) — ~1.5 µs a header, 7 headers a reserve. A value
    that is not (none today) goes through `response[k] = v`, which encodes or refuses it as always."""
    store = response.headers._store  # the mapping ResponseHeaders.__setitem__ writes (Django 3.2+)
    for k, v in headers.items():
        if v.isascii() and v.isprintable():
            store[k.lower()] = (k, v)
        else:
            response[k] = v


def _reserve(parsed: services.ReserveRequest, epoch: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
    d = services.reserve(parsed, epoch)
    ra = d.body.get("retry_after_s") if d.status == 429 else None
    return (
        d.status,
        d.body,
        (d.headers if ra is None else {**d.headers, "Retry-After": str(ra)}),
    )  # OUTSIDE_ENVELOPE: no retry


def _complete(parsed: services.CompleteRequest, epoch: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
    status, body = services.complete(parsed, epoch)
    return status, body, {}


def _served(view: APIView, request: Request, serve: Any, parsed: Any) -> Response:
    """DRF's path: the store checks the token's epoch in the same call (admission.auth)."""

    def again() -> None:
        # DRF's own step: 401 for a token revoked or a user deactivated since
        request._authenticate()  # type: ignore[attr-defined]
        view.check_permissions(request)  # 403 for a gateway role removed since

    status, body, headers = under_epoch(request, lambda epoch: serve(parsed, epoch), again)
    return Response(body, status=status, headers=headers)


class ReserveView(_GatewayFastPath, APIView):
    authentication_classes = SERVING_AUTH
    permission_classes = [IsGateway]
    parse, serve = staticmethod(services.parse_reserve), staticmethod(_reserve)

    @extend_schema(
        request=inline_serializer(
            "ReserveRequest",
            {
                "request_id": serializers.CharField(),
                "tenant": serializers.CharField(),
                "project": serializers.CharField(required=False),
                "model": serializers.CharField(),
                "region": serializers.CharField(),
                "traffic_class": serializers.ChoiceField(services.CLASSES),
                "prompt_tokens": serializers.IntegerField(min_value=0),
                "cached_prompt_tokens": serializers.IntegerField(min_value=0, required=False),
                "max_output_tokens": serializers.IntegerField(min_value=0, required=False),
                "overflow": serializers.ChoiceField(services.OVERFLOWS, required=False),
            },
        ),
        responses={
            200: inline_serializer(
                "ReserveAdmit",
                {
                    "decision": serializers.CharField(),
                    "reservation_id": serializers.CharField(),
                    "reserved_wt": serializers.FloatField(),
                    "source": serializers.ChoiceField(["entitlement", "borrowed", "spillover", "fail_open"]),
                    "served_from": serializers.CharField(required=False),
                    "expires_at": serializers.DateTimeField(),
                },
            ),
            429: _THROTTLE,
        },
    )
    def post(self, request: Request) -> Response:
        return _served(self, request, _reserve, services.parse_reserve(request.data))


class CompleteView(_GatewayFastPath, APIView):
    authentication_classes = SERVING_AUTH
    permission_classes = [IsGateway]
    parse, serve = staticmethod(services.parse_complete), staticmethod(_complete)

    @extend_schema(
        request=inline_serializer(
            "CompleteRequest",
            {
                "reservation_id": serializers.CharField(),
                "prompt_tokens": serializers.IntegerField(min_value=0),
                "cached_prompt_tokens": serializers.IntegerField(min_value=0, required=False),
                "output_tokens": serializers.IntegerField(min_value=0),
                "status": serializers.ChoiceField(services.STATUSES),
                "ttft_ms": serializers.FloatField(required=False),
                "e2e_ms": serializers.FloatField(required=False),
            },
        ),
        responses={200: OpenApiResponse(description="settled"), 404: OpenApiResponse(description="unknown")},
    )
    def post(self, request: Request) -> Response:
        return _served(self, request, _complete, services.parse_complete(request.data))


class PoolHealthView(APIView):
    """Operator override of a pool's healthy replicas; DELETE returns the pool to telemetry."""

    permission_classes = [IsOperator]

    @extend_schema(
        request=inline_serializer(
            "PoolHealthRequest",
            {"replicas_healthy": serializers.IntegerField(min_value=0), "replicas_total": serializers.IntegerField()},
        ),
        responses={200: OpenApiResponse(description="the override")},
    )
    def post(self, request: Request, slug: str) -> Response:
        pool = get_object_or_404(Pool, slug=slug)
        data: Any = request.data
        fields = {}
        for name in ("replicas_healthy", "replicas_total"):
            v = data.get(name) if isinstance(data, dict) else None
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValidationError({name: "must be a whole number ≥ 0"})
            fields[name] = v
        row = services.set_pool_health(pool=pool, actor=request.user, **fields)
        return Response({"pool": pool.slug, "replicas_healthy": row.replicas_healthy,
                         "replicas_total": row.replicas_total, "source": "operator"})  # fmt: skip

    @extend_schema(responses={204: OpenApiResponse(description="override removed")})
    def delete(self, request: Request, slug: str) -> Response:
        services.clear_pool_health(pool=get_object_or_404(Pool, slug=slug))
        return Response(status=204)
