"""The gateway fast path (api._GatewayFastPath) answers byte for byte as the DRF path does, and
only takes the requests DRF would have authenticated from the token cache and parsed as JSON."""

from __future__ import annotations

import json

import pytest
from rest_framework.views import APIView

from admission import api
from tests.admission.world import body, build_world

RESERVE, COMPLETE = "/api/v1/admission/reserve", "/api/v1/admission/complete"
HEADERS = ("Content-Type", "Allow", "Vary", "Retry-After", "X-Frame-Options", "X-Content-Type-Options")


@pytest.fixture
def w(fleet, memory_store, sink):
    return build_world(fleet)


def shape(content: bytes) -> list:
    return [(k, type(v).__name__) for k, v in json.loads(content).items()]


def seen(r):
    return r.status_code, r.content, {h: r.get(h) for h in HEADERS}


def test_answers_are_the_same_bytes_as_through_drf(w, monkeypatch):
    gw = w.gateway
    gw.post(RESERVE, body("acme", "reserved", "warm"), format="json")  # the token is now cached

    def calls(tag):
        admit = gw.post(RESERVE, body("acme", "reserved", f"{tag}-a"), format="json")
        replay = gw.post(RESERVE, body("acme", "reserved", f"{tag}-a"), format="json")
        rid = admit.json()["reservation_id"]
        done = {"reservation_id": rid, "prompt_tokens": 100, "output_tokens": 10, "status": "ok"}
        return [
            admit,
            replay,
            gw.post(RESERVE, body("acme", "reserved", f"{tag}-big", prompt=9000), format="json"),  # 429
            gw.post(COMPLETE, done, format="json"),
            gw.post(COMPLETE, done, format="json"),
            gw.post(COMPLETE, {**done, "reservation_id": "nope"}, format="json"),  # 404
        ]

    fast = [seen(r) for r in calls("x")]
    monkeypatch.setattr(api._GatewayFastPath, "_fast", lambda self, request: api._SLOW)
    slow = [seen(r) for r in calls("y")]
    assert [s[0] for s in fast] == [200, 200, 429, 200, 200, 404]
    for f, s in zip(fast, slow, strict=True):
        assert (f[0], f[2]) == (s[0], s[2])
        # The request ids differ, so ids and times do; fields, their order and their types do not.
        assert shape(f[1]) == shape(s[1])
    # Bodies match once the request-specific values (ids, times) are the same: the throttle and the 404 are.
    assert (fast[2][1], fast[5][1]) == (slow[2][1], slow[5][1])
    assert fast[0][1] == fast[1][1] and fast[3][1] == fast[4][1]


def test_drf_is_skipped_only_for_a_cached_gateway_token(w, monkeypatch):
    gw = w.gateway
    assert gw.post(RESERVE, body("acme", "reserved", "first"), format="json").status_code == 200  # DRF: caches it

    def no_drf(*a, **kw):
        raise AssertionError("took the DRF path")

    monkeypatch.setattr(APIView, "initial", no_drf)
    assert gw.post(RESERVE, body("acme", "reserved", "hot"), format="json").status_code == 200
    for kw in ({"HTTP_ACCEPT": "text/html"}, {"QUERY_STRING": "format=json"}):
        with pytest.raises(AssertionError, match="DRF path"):
            gw.post(RESERVE, body("acme", "reserved", "other"), format="json", **kw)
    with pytest.raises(AssertionError, match="DRF path"):  # bad input: DRF words the 400
        gw.post(RESERVE, {**body("acme", "reserved", "bad"), "prompt_tokens": -1}, format="json")
    with pytest.raises(AssertionError, match="DRF path"):  # not JSON
        gw.post(RESERVE, body("acme", "reserved", "form"))


def test_a_cached_gateway_call_skips_the_page_middleware(w, monkeypatch):
    """admission.fast_route answers it above the session, CSRF, auth, messages and page middleware and
    URL resolution; a call it declines still goes the whole way down."""
    from django.contrib.auth.middleware import AuthenticationMiddleware
    from django.middleware.csrf import CsrfViewMiddleware

    gw = w.gateway
    assert gw.post(RESERVE, body("acme", "reserved", "first"), format="json").status_code == 200  # caches the token
    below = []
    for cls in (AuthenticationMiddleware, CsrfViewMiddleware):
        real = cls.process_request

        def spy(self, request, real=real, name=cls.__name__):
            below.append(name)
            return real(self, request)

        monkeypatch.setattr(cls, "process_request", spy)
    hot = gw.post(RESERVE, body("acme", "reserved", "hot"), format="json")
    assert hot.status_code == 200 and below == []
    assert hot["X-Frame-Options"] == "DENY" and hot["X-Content-Type-Options"] == "nosniff"  # the headers still set
    rid = hot.json()["reservation_id"]
    done = {"reservation_id": rid, "prompt_tokens": 10, "output_tokens": 1, "status": "ok"}
    assert gw.post(COMPLETE, done, format="json").status_code == 200 and below == []
    bad = gw.post(RESERVE, {**body("acme", "reserved", "bad"), "prompt_tokens": -1}, format="json")
    assert bad.status_code == 400 and sorted(below) == ["AuthenticationMiddleware", "CsrfViewMiddleware"]


def test_every_header_is_as_drf_names_it(w, monkeypatch):
    """The quota headers too (api._set_headers writes them past ResponseHeaders' conversion): the same
    names, in the same spelling, on the fast path as through DRF, and the static ones' values."""
    gw = w.gateway
    gw.post(RESERVE, body("acme", "reserved", "warm"), format="json")
    fast = gw.post(RESERVE, body("acme", "reserved", "f"), format="json")
    monkeypatch.setattr(api._GatewayFastPath, "_fast", lambda self, request: api._SLOW)
    slow = gw.post(RESERVE, body("acme", "reserved", "s"), format="json")
    assert sorted(fast.headers) == sorted(slow.headers)
    assert "x-ratelimit-remaining-tokens" in fast.headers
    for h in ("Allow", "Vary", "Content-Type", "x-ratelimit-limit-tokens"):
        assert fast.headers[h] == slow.headers[h]


@pytest.mark.parametrize(
    "headers",
    [
        {"x-ratelimit-remaining-tokens": "7940", "x-ratelimit-reset-tokens": "1", "Retry-After": "5"},
        {"x-headroom-served-from": "pool-b", "x-headroom-budget-remaining-usd": "12.5"},
        {"x-headroom-served-from": "Zürich"},  # not ASCII: encoded as ResponseHeaders always did (MIME)
    ],
)
def test_set_headers_stores_what_response_setitem_would(headers):
    from django.http import HttpResponse

    fast, plain = api._answer(b"{}", 200), HttpResponse(b"{}", content_type="application/json")
    api._set_headers(fast, headers)
    plain["Allow"], plain["Vary"] = "POST, OPTIONS", "Accept"
    for k, v in headers.items():
        plain[k] = v
    assert fast.headers._store == plain.headers._store


def test_set_headers_still_refuses_a_newline():
    from django.http import BadHeaderError, HttpResponse

    with pytest.raises(BadHeaderError):
        api._set_headers(HttpResponse(b"{}"), {"x-headroom-served-from": "a\r\nSet-Cookie: x=1"})


@pytest.mark.parametrize("status", [200, 404, 429])
def test_answer_is_the_response_django_builds(status):
    """api._answer sets HttpResponse's attributes itself: the same names and values as HttpResponse's own
    __init__ (a Django upgrade that adds or renames one fails here), the same bytes on the wire."""
    from django.http import HttpResponse

    content = b'{"decision":"admit"}'
    fast = api._answer(content, status)
    plain = HttpResponse(content, status=status, content_type="application/json")
    plain["Allow"], plain["Vary"] = "POST, OPTIONS", "Accept"
    f, p = vars(fast), vars(plain)
    assert sorted(f) == sorted(p)
    for k in f:
        if k == "cookies":
            assert type(f[k]) is type(p[k]) and f[k] == p[k] == {}
        elif k == "headers":
            assert list(f[k].items()) == list(p[k].items())
        else:
            assert f[k] == p[k], k
    assert fast.serialize() == plain.serialize() and fast.reason_phrase == plain.reason_phrase
    assert fast.cookies is not api._answer(content, status).cookies  # nothing shared between answers


def test_the_fast_route_finds_the_serving_paths_below_a_script_prefix(w, monkeypatch):
    """Mounted under a script prefix (SCRIPT_NAME), the routes are found by path_info, as URL resolution
    finds them; the path resolution never sees (resolve) is not consulted for them."""
    import django.urls.resolvers as resolvers

    gw = w.gateway
    assert gw.post(RESERVE, body("acme", "reserved", "first"), format="json").status_code == 200

    def no_resolve(*a, **kw):
        raise AssertionError("resolved the URL")

    monkeypatch.setattr(resolvers.URLResolver, "resolve", no_resolve)
    hot = gw.post(RESERVE, body("acme", "reserved", "hot"), format="json", SCRIPT_NAME="/portal")
    assert hot.status_code == 200 and hot["X-Frame-Options"] == "DENY"
    with pytest.raises(AssertionError, match="resolved the URL"):  # any other path goes down the stack
        gw.post("/api/v1/admission/reserve/x", body("acme", "reserved", "other"), format="json")
