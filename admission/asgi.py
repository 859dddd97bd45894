"""Admission as ASGI middleware (docs/contract.md §5, issue 20): mount it in front of any Python gateway.

    app = AdmissionMiddleware(gateway_app, Library(...))        # library mode (admission.library)
    app = AdmissionMiddleware(gateway_app, AdmissionClient(...)) # or over HTTP (admission.client)

For each request to one of `paths` (OpenAI-style by default):
- **reserve** before the gateway sees it. Who is asking comes from `resolve(scope, headers, body)`
  (default: headers `x-headroom-tenant`, `-project`, `-region`, `-traffic-class`, `-overflow`, `x-request-id`;
  the model from the JSON body, `max_tokens` / `max_completion_tokens` as the output estimate).
  Prompt tokens: header `x-headroom-prompt-tokens`, else `count_prompt(body)` (default: the
  characters of the messages or prompt / 4, rounded up).
- **throttle**: 429 with the reason JSON (`decision`, `reason`, `responsible`, `retry_after_s`, and
  an OpenAI-style `error`), `Retry-After` when a retry can pass. A replay of a request already
  settled is a 409 (a gateway never serves a settled answer); a bad header a 400 naming it.
- **remaining quota**: every answer the store made (the gateway's own response when admitted, the
  429, the 409) carries the `x-ratelimit-*` / `x-headroom-budget-*` headers of the reserve
  (docs/contract.md §5), replacing any the gateway's upstream sent: Headroom's bucket is what this client has.
- **complete** exactly once when the response ends: with the `usage` the stream (SSE chunks, the
  last carrying usage) or the JSON body reported, else the prompt estimate and one output token
  per streamed content chunk; `cancelled` when the client went away first, `error` when the
  gateway answered ≥ 500 or raised. `ttft_ms` is measured to the first body byte.

Decisions and settlements are blocking calls (one Redis round trip, or one HTTP call): they run in
a worker thread so the event loop keeps serving other streams.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from admission.client import QUOTA_KEY
from capacity.input_errors import FieldError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_PATHS = ("/v1/chat/completions", "/v1/completions")
HEADER = "x-headroom-"
MAX_BODY = 8 * 1024 * 1024  # a request body larger than this is refused (413) before any reserve


class BadRequest(FieldError):
    named_in_str = True


def count_prompt(body: dict[str, Any]) -> int:
    """A prompt estimate from the request body: characters / 4, rounded up (the usage the stream
    reports settles the real figure)."""
    chars = 0
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            chars += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        chars += len(prompt)
    return math.ceil(chars / 4)


def _int_header(headers: dict[str, str], name: str) -> int | None:
    v = headers.get(name)
    if v is None:
        return None
    if not v.isdigit():
        raise BadRequest(name, "must be a whole number")
    return int(v)


def default_resolve(scope: Scope, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """The reserve arguments from headers and the JSON body (see the module docstring)."""
    out_est = body.get("max_completion_tokens", body.get("max_tokens"))
    if out_est is not None and (isinstance(out_est, bool) or not isinstance(out_est, int) or out_est < 0):
        raise BadRequest("max_tokens", "must be a whole number")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise BadRequest("model", "the request body must name a model")
    for name in ("tenant", "region"):
        if not headers.get(HEADER + name):
            raise BadRequest(HEADER + name, "this header is required")
    prompt = _int_header(headers, HEADER + "prompt-tokens")
    overflow = headers.get(HEADER + "overflow") or None  # spillover for this request (issue 36.1)
    if overflow is not None and overflow not in ("allow", "deny"):
        raise BadRequest(HEADER + "overflow", "must be allow or deny")
    return {
        "request_id": headers.get("x-request-id") or uuid.uuid4().hex,
        "tenant": headers[HEADER + "tenant"],
        "project": headers.get(HEADER + "project") or None,
        "model": model,
        "region": headers[HEADER + "region"],
        "traffic_class": headers.get(HEADER + "traffic-class", "shared"),
        "prompt_tokens": prompt if prompt is not None else count_prompt(body),
        "cached_prompt_tokens": _int_header(headers, HEADER + "cached-prompt-tokens"),
        "max_output_tokens": out_est,
        "overflow": overflow,
    }


@dataclass
class _Usage:
    """What the response said about its tokens, read as it streams by."""

    status: int = 0
    sse: bool = False
    started: float = 0.0
    first_byte: float | None = None
    chunks: int = 0  # streamed chunks that carried content
    usage: dict[str, Any] | None = None
    tail: bytes = b""  # an SSE line split across body messages
    body: bytearray = field(default_factory=bytearray)  # a non-streamed JSON body (bounded)

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self.first_byte is None:
            self.first_byte = time.monotonic()
        if not self.sse:
            if len(self.body) < MAX_BODY:
                self.body += data
            return
        buf = self.tail + data
        lines = buf.split(b"\n")
        self.tail = lines.pop()
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        payload = line[5:].strip()
        if not payload or payload == b"[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        for c in chunk.get("choices") or ():
            if not isinstance(c, dict):
                continue
            delta = c.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            if text or c.get("text"):
                self.chunks += 1

    def finish(self) -> None:
        if self.sse and self.tail:
            self._line(self.tail.strip())
            self.tail = b""
        if not self.sse and self.body:
            try:
                doc = json.loads(bytes(self.body))
            except ValueError:
                return
            if isinstance(doc, dict) and isinstance(doc.get("usage"), dict):
                self.usage = doc["usage"]

    def tokens(self, prompt_est: int) -> tuple[int, int, int | None]:
        """(prompt, output, cached) to settle with: the reported usage, else the estimates."""
        u = self.usage or {}
        prompt = u.get("prompt_tokens")
        output = u.get("completion_tokens")
        details = u.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        ok = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0  # noqa: E731
        prompt = prompt if ok(prompt) else prompt_est
        output = output if ok(output) else self.chunks
        # ok() has checked each is a non-negative int; a lambda does not narrow for mypy.
        cached = cached if ok(cached) and cached <= prompt else None  # type: ignore[operator]
        return prompt, output, cached  # type: ignore[return-value]


def _json_response(status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] = ()) -> list[Message]:  # type: ignore[assignment]
    raw = json.dumps(body, separators=(",", ":")).encode()
    h = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()), *headers]
    return [{"type": "http.response.start", "status": status, "headers": h},
            {"type": "http.response.body", "body": raw}]  # fmt: skip


_OPENAI_TYPE = {
    "tenant": "rate_limit_exceeded",
    "platform": "capacity_unavailable",
    "platform policy": "capacity_reclaimed",
}


def _quota(d: dict[str, Any]) -> list[tuple[bytes, bytes]]:
    """The remaining-quota headers a reserve answer carries (docs/contract.md §5), taken out of the answer."""
    got = d.pop(QUOTA_KEY, None) or {}
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in got.items()]


def throttle_response(d: dict[str, Any], quota: list[tuple[bytes, bytes]] = ()) -> list[Message]:  # type: ignore[assignment]
    """The 429: the reason JSON (docs/contract.md §4) plus an OpenAI-style `error` for SDK clients."""
    said = f"{d['reason']} ({d['responsible']})" + (f": {d['message']}" if d.get("message") else "")
    body = {**d, "error": {"message": said, "code": d["reason"],
                           "type": _OPENAI_TYPE.get(d.get("responsible", ""), "rate_limit_exceeded")}}  # fmt: skip
    ra = d.get("retry_after_s")
    return _json_response(429, body, [*quota, *([(b"retry-after", str(ra).encode())] if ra is not None else [])])


class AdmissionMiddleware:
    def __init__(
        self, app: ASGIApp, admission: Any, *, paths: tuple[str, ...] = DEFAULT_PATHS,
        resolve: Callable[[Scope, dict[str, str], dict[str, Any]], dict[str, Any]] = default_resolve,
        offload: bool = True,
    ) -> None:  # fmt: skip
        """`admission`: anything with AdmissionClient's reserve / complete (admission.library.Library
        or admission.client.AdmissionClient). `offload`: run them in a worker thread (default)."""
        self.app, self.admission, self.paths, self.resolve, self.offload = app, admission, paths, resolve, offload

    async def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        if self.offload:
            return await asyncio.to_thread(fn, *args, **kw)
        return fn(*args, **kw)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") not in self.paths:
            await self.app(scope, receive, send)
            return
        body, disconnected = await _read_body(receive)
        if disconnected:
            return  # gone before asking: nothing reserved, nothing to answer
        if body is None:
            for m in _json_response(413, {"error": {"message": "request body too large", "code": "body_too_large"}}):
                await send(m)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", ())}
        try:
            doc = json.loads(body) if body else {}
            if not isinstance(doc, dict):
                raise BadRequest("body", "must be a JSON object")
            args = self.resolve(scope, headers, doc)
            d = await self._call(self.admission.reserve, **args)
        except ValueError as exc:  # BadRequest, InvalidRequest (both name the field) or bad JSON
            name = getattr(exc, "field", "body")
            for m in _json_response(400, {"error": {"message": str(exc), "code": "invalid_request", "field": name}}):
                await send(m)
            return
        quota = _quota(d)
        if d.get("decision") != "admit":
            msgs = throttle_response(d, quota) if d.get("decision") == "throttle" else _json_response(400, d)
            for m in msgs:
                await send(m)
            return
        if d.get("settled"):
            for m in _json_response(409, {"error": {"message": "this request_id was already served",
                                                    "code": "duplicate_request"}}, quota):  # fmt: skip
                await send(m)
            return
        await self._serve(scope, receive, send, body, args, d["reservation_id"], quota)

    async def _serve(self, scope: Scope, receive: Receive, send: Send, body: bytes, args: dict[str, Any],
                     reservation_id: str, quota: list[tuple[bytes, bytes]]) -> None:  # fmt: skip
        u = _Usage(started=time.monotonic())
        gone = False  # the client left before the response was whole
        sent = False  # the response's last body message went out
        replayed = False

        async def inner_receive() -> Message:
            nonlocal replayed, gone
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            m = await receive()
            if m["type"] == "http.disconnect" and not sent:
                gone = True  # (after the whole response, a disconnect is just the end of the exchange)
            return m

        async def inner_send(m: Message) -> None:
            nonlocal gone, sent
            if m["type"] == "http.response.start":
                u.status = int(m["status"])
                ctype = {k.lower(): v for k, v in m.get("headers", ())}.get(b"content-type", b"")
                u.sse = ctype.startswith(b"text/event-stream")
                if quota:
                    # Headroom's remaining quota, not an upstream provider's, is what this client has left.
                    ours = {k for k, _ in quota}
                    m = {**m, "headers": [*(h for h in m.get("headers", ()) if h[0].lower() not in ours), *quota]}
            elif m["type"] == "http.response.body":
                u.feed(m.get("body", b""))
            try:
                await send(m)
            except OSError:  # the client went away under a write (ASGI spec 2.4 servers raise it)
                gone = True
                raise
            if m["type"] == "http.response.body" and not m.get("more_body", False):
                sent = True

        outcome = "error"
        try:
            await self.app(scope, inner_receive, inner_send)
            outcome = "ok" if 0 < u.status < 500 else "error"
        finally:
            # asyncio.CancelledError (the server cancelled us when the client left) lands here too.
            if gone:
                outcome = "cancelled"
            u.finish()
            prompt, output, cached = u.tokens(args["prompt_tokens"])
            now = time.monotonic()
            ttft = None if u.first_byte is None else round((u.first_byte - u.started) * 1000, 3)
            kw = {"prompt_tokens": prompt, "output_tokens": output, "status": outcome, "cached_prompt_tokens": cached,
                  "ttft_ms": ttft, "e2e_ms": round((now - u.started) * 1000, 3)}  # fmt: skip
            # Shielded: a cancelled request must still be settled (its slot freed, its tokens charged).
            await asyncio.shield(self._call(self.admission.complete, reservation_id, **kw))


async def _read_body(receive: Receive) -> tuple[bytes | None, bool]:
    """(the whole request body or None when it is over MAX_BODY, whether the client left)."""
    chunks = bytearray()
    while True:
        m = await receive()
        if m["type"] == "http.disconnect":
            return bytes(chunks), True
        chunks += m.get("body", b"")
        if len(chunks) > MAX_BODY:
            return None, False
        if not m.get("more_body", False):
            return bytes(chunks), False
