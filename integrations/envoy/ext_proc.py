"""Headroom admission for Envoy (issue 37.2): a gRPC external processor
(`envoy.service.ext_proc.v3.ExternalProcessor`) for Envoy's `envoy.filters.http.ext_proc` filter.

Run it beside Envoy, with the Headroom checkout importable (integrations/envoy/envoy.yaml is a
complete Envoy configuration for it; docs/gateways.md has the whole story):

    PYTHONPATH=/path/to/headroom python -m integrations.envoy.ext_proc --port 50051 [--health-port 50052]

Per OpenAI-shaped request (`POST …/chat/completions` or `…/completions`; anything else passes untouched):
- **request headers** (SKIP: no message, no round trip of their own): what the ext_proc reads of them
  (`HEADER_ATTRIBUTES`: path, method, x-request-id, the key and x-headroom-* headers) comes as the
  filter's `request_attributes` on the body message. (With request headers SENT it reads them there.)
- **request body** (BUFFERED: the whole JSON in one message): reserve. Request id = Envoy's
  `x-request-id`; tenant / project / traffic class from the API key (`Authorization: Bearer …` or
  `x-api-key`) looked up in the config file's `keys`, else, when HEADROOM_TRUST_HEADERS=1, from the
  `x-headroom-tenant`, `x-headroom-project`, `x-headroom-traffic-class` headers (set by a filter in
  front, e.g. jwt_authn's claim_to_headers; Envoy must strip clients' own); model and region from
  the body's `model` through the config file's `models` (default: the same name, HEADROOM_REGION);
  prompt tokens estimated from the messages' text (`estimate_prompt`); `max_completion_tokens` or
  `max_tokens` as the output estimate (absent: Headroom uses the envelope's p95).
  A throttle ends the request there: an ImmediateResponse 429 whose JSON body is Headroom's answer
  (`decision`, `reason`, `responsible`, `retry_after_s`, and an OpenAI-shaped `error`), with
  `Retry-After` (when a retry can pass), `x-headroom-reason`, `x-headroom-responsible` and the
  `x-ratelimit-*` remaining-quota headers. A request with no tenant is refused 403, never served
  unmetered; a malformed body 400.
- **response headers** (SEND): an admitted request's answer gets the remaining-quota headers.
- **response body** (STREAMED: each chunk as Envoy forwards it, nothing buffered): a JSON answer's
  `usage`, or for a server-sent-event stream the last chunk's `usage` (the client asks for it with
  `stream_options.include_usage`); at the end of the body: complete `ok` (`error` for a status ≥ 400)
  with that usage, else with the prompt estimate and the content chunks seen.
- a stream Envoy closes before the response ended (the client left, a timeout): complete
  `cancelled` with the usage seen, else the prompt estimate and the content chunks forwarded.

A reservation is completed once. Mode (library mode when HEADROOM_REDIS_URL is set, HTTP otherwise)
and the other HEADROOM_* settings as integrations/headroom_admission.py says; events of library
mode are sent with source `envoy`. The config file (HEADROOM_EXT_PROC_CONFIG or --config, JSON):

    {"keys":   {"sk-…": {"tenant": "acme", "project": "search", "traffic_class": "reserved"}},
     "models": {"llama-eu": {"model": "llama-3.1-70b", "region": "eu-west"}}}
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc
from envoy.type.v3 import http_status_pb2

from integrations import headroom_admission as ha

log = logging.getLogger("headroom.envoy")

METERED = ("/chat/completions", "/completions")
MAX_BODY = 8 << 20  # a JSON answer larger than this is not parsed for usage (a stream is parsed line by line)
PER_MESSAGE = 3  # prompt tokens a chat template adds per message, in the estimate


def estimate_prompt(body: dict[str, Any]) -> int:
    """Prompt tokens before the model has counted them: ⌈characters / 4⌉ of each message's text (or
    of `prompt`) + 3 per message. An estimate only: the reservation is settled on the upstream's usage."""
    msgs = body.get("messages")
    if isinstance(msgs, list):
        n = 0
        for m in msgs:
            c = m.get("content") if isinstance(m, dict) else None
            if isinstance(c, list):
                c = " ".join(p.get("text", "") for p in c if isinstance(p, dict) and isinstance(p.get("text"), str))
            n += math.ceil(len(c) / 4) if isinstance(c, str) else 0
            n += PER_MESSAGE
        return n
    p = body.get("prompt")
    if isinstance(p, list):
        p = " ".join(x for x in p if isinstance(x, str))
    return math.ceil(len(p) / 4) if isinstance(p, str) else 0


@dataclass
class Config:
    keys: dict[str, dict[str, Any]] = field(default_factory=dict)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    region: str | None = None
    traffic_class: str = "shared"
    trust_headers: bool = False

    @classmethod
    def load(cls, path: str | None) -> Config:
        d: dict[str, Any] = {}
        if path:
            with open(path) as fh:
                d = json.load(fh)
        env = os.environ
        return cls(keys=d.get("keys") or {}, models=d.get("models") or {}, region=env.get("HEADROOM_REGION"),
                   traffic_class=env.get("HEADROOM_TRAFFIC_CLASS", "shared"),
                   trust_headers=env.get("HEADROOM_TRUST_HEADERS", "0").lower() in ("1", "true", "yes", "on"))  # fmt: skip

    def who(self, h: dict[str, str]) -> dict[str, Any]:
        """Tenant, project and class: the API key's entry in `keys`, else (trusted) x-headroom-* headers."""
        auth = h.get("authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else h.get("x-api-key", "")
        k = self.keys.get(key) or {}
        trusted = self.trust_headers and not k

        def pick(name: str) -> Any:
            return k.get(name) or (h.get("x-headroom-" + name.replace("_", "-")) if trusted else None)

        return {"tenant": pick("tenant"), "project": pick("project"),
                "traffic_class": pick("traffic_class") or self.traffic_class}  # fmt: skip

    def scope(self, name: str) -> tuple[str, str | None]:
        m = self.models.get(name) or {}
        return m.get("model") or name, m.get("region") or self.region


# The request headers the ext_proc reads, asked of Envoy as request_attributes (CEL expressions, their
# values on the body message) so that request headers need no message of their own: envoy.yaml lists
# these very expressions (tests/integrations/test_envoy_ext_proc.py checks that they agree).
HEADER_ATTRIBUTES = {
    "request.path": ":path",
    "request.method": ":method",
    **{f'request.headers["{h}"]': h for h in ("x-request-id", "authorization", "x-api-key", "x-headroom-tenant",
                                              "x-headroom-project", "x-headroom-traffic-class")},
}  # fmt: skip
ATTRIBUTES_NS = "envoy.filters.http.ext_proc"


def _attribute_headers(req: Any) -> dict[str, str]:
    """The request headers Envoy sent as attributes (`HEADER_ATTRIBUTES`), by header name."""
    if ATTRIBUTES_NS not in req.attributes:
        return {}
    fields = req.attributes[ATTRIBUTES_NS].fields
    return {h: fields[a].string_value for a, h in HEADER_ATTRIBUTES.items() if a in fields}


def _headers(hs: Any) -> dict[str, str]:
    out = {}
    for h in hs.headers.headers:
        out[h.key.lower()] = h.raw_value.decode("utf-8", "replace") if h.raw_value else h.value
    return out


def _hvo(k: str, v: str) -> base_pb2.HeaderValueOption:
    return base_pb2.HeaderValueOption(
        header=base_pb2.HeaderValue(key=k, raw_value=v.encode()),
        append_action=base_pb2.HeaderValueOption.OVERWRITE_IF_EXISTS_OR_ADD,
    )


def immediate(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> pb.ProcessingResponse:
    hs = {"content-type": "application/json", **(headers or {})}
    return pb.ProcessingResponse(
        immediate_response=pb.ImmediateResponse(
            status=http_status_pb2.HttpStatus(code=status),
            headers=pb.HeaderMutation(set_headers=[_hvo(k, v) for k, v in hs.items()]),
            body=json.dumps(body, separators=(",", ":")).encode(),
            details=f"headroom_{status}",
        )
    )


def refusal(status: int, message: str, kind: str) -> pb.ProcessingResponse:
    return immediate(status, {"error": {"message": message, "type": kind, "code": str(status)}})


def throttle(d: dict[str, Any]) -> pb.ProcessingResponse:
    body = {
        "error": {"message": ha.throttle_message(d), "type": "throttling_error", "code": d.get("reason")},
        **{k: d.get(k) for k in ("decision", "reason", "responsible", "retry_after_s")},
    }
    for k in ("limit",):
        if k in d:
            body[k] = d[k]
    return immediate(ha.throttle_status(d), body, ha.throttle_headers(d))  # 503: the gateway's token refused


CONTINUE_REQ_HEADERS = pb.ProcessingResponse(request_headers=pb.HeadersResponse())
CONTINUE_REQ_BODY = pb.ProcessingResponse(request_body=pb.BodyResponse())
CONTINUE_RESP_HEADERS = pb.ProcessingResponse(response_headers=pb.HeadersResponse())
CONTINUE_RESP_BODY = pb.ProcessingResponse(response_body=pb.BodyResponse())
CONTINUE_REQ_TRAILERS = pb.ProcessingResponse(request_trailers=pb.TrailersResponse())
CONTINUE_RESP_TRAILERS = pb.ProcessingResponse(response_trailers=pb.TrailersResponse())


class Exchange:
    """One HTTP request's state across its ext_proc stream."""

    __slots__ = ("headers", "body", "metered", "reservation", "adm", "prompt_est", "quota", "started", "first_byte",
                 "status", "sse", "resp", "usage", "chunks", "settled")  # fmt: skip

    def __init__(self) -> None:
        self.headers: dict[str, str] = {}
        self.body = b""  # BUFFERED: the one message's bytes, taken as they are (no copy)
        self.metered = False
        self.reservation: str | None = None
        self.adm: Any = None
        self.prompt_est = 0
        self.quota: dict[str, str] = {}
        self.started = time.monotonic()
        self.first_byte: float | None = None
        self.status = 200
        self.sse = False
        self.resp = bytearray()  # a JSON answer's body; for a stream, the unfinished last line
        self.usage: dict[str, Any] | None = None
        self.chunks = 0
        self.settled = False

    def feed(self, chunk: bytes) -> None:
        if self.first_byte is None and chunk:
            self.first_byte = time.monotonic()
        if not self.sse:
            if len(self.resp) + len(chunk) <= MAX_BODY:
                self.resp += chunk
            return
        self.resp += chunk
        *lines, rest = bytes(self.resp).split(b"\n")
        self.resp = bytearray(rest)
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            if b'"content"' in line:
                self.chunks += 1  # ~ one token each (corrected by the usage chunk when it comes)
            if b'"usage"' in line:
                try:
                    u = json.loads(line[5:]).get("usage")
                except (ValueError, AttributeError):
                    continue
                if isinstance(u, dict):
                    self.usage = u

    def finish_json(self) -> None:
        if self.sse:
            self.feed(b"\n")
            return
        try:
            u = json.loads(bytes(self.resp)).get("usage")
        except (ValueError, AttributeError):
            return
        if isinstance(u, dict):
            self.usage = u


class Processor(pb_grpc.ExternalProcessorServicer):
    def __init__(self, config: Config, admission: Any = None, *, workers: int = 32) -> None:
        self.config = config
        self.lazy = ha.LazyAdmission("envoy", admission)
        self.enabled = ha.enabled()
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="headroom")
        # Library mode's reserve is one Redis script (sub-millisecond): made on the event loop (a hop to a
        # worker thread measured no faster). HTTP mode's waits for the portal: threads. A complete is
        # always made in a worker thread, after the answer went on (settle).
        self.inline = bool(os.environ.get("HEADROOM_REDIS_URL"))

    def close(self) -> None:
        """After the server stopped: the settlements in flight finished, library mode's events flushed."""
        adm = self.lazy._admission
        self.pool.shutdown(wait=True)
        if adm is not None and hasattr(adm, "close"):
            adm.close()  # library mode: flush its events to the portal

    def warm(self) -> None:
        """Build the admission now (library mode reads the portal's snapshot); on failure the first
        request tries again (and meanwhile the fail mode answers)."""
        try:
            self.lazy.get()
        except Exception as exc:  # noqa: BLE001 - the portal may be starting: the first request retries
            log.warning("Headroom: admission not ready yet (%s)", exc)

    async def Process(self, request_iterator: Any, context: Any) -> Any:  # noqa: N802 - the gRPC method's name
        x = Exchange()
        loop = asyncio.get_running_loop()
        try:
            async for req in request_iterator:
                kind = req.WhichOneof("request")
                if kind == "request_headers":
                    x.headers = _headers(req.request_headers)
                    x.metered = self.meters(x.headers) and not req.request_headers.end_of_stream
                    yield CONTINUE_REQ_HEADERS
                elif kind == "request_body":
                    if not x.headers:  # request headers SKIPped: they came as attributes with the body
                        x.headers = _attribute_headers(req)
                        x.metered = self.meters(x.headers)
                    if not x.metered:
                        yield CONTINUE_REQ_BODY
                        continue
                    rb = req.request_body
                    x.body = x.body + rb.body if x.body else rb.body
                    if not rb.end_of_stream:  # BUFFERED sends one message; be safe with more
                        yield CONTINUE_REQ_BODY
                        continue
                    if self.inline and self.lazy._admission is not None:
                        answer = self.on_request(x)
                    else:
                        answer = await loop.run_in_executor(self.pool, self.on_request, x)
                    yield answer
                    if answer.HasField("immediate_response"):
                        return
                elif kind == "response_headers":
                    yield self.on_response_headers(x, req.response_headers)
                    if req.response_headers.end_of_stream:
                        self.settle(x, "ok" if x.status < 400 else "error")
                elif kind == "response_body":
                    if x.reservation is not None:
                        x.feed(req.response_body.body)
                        if req.response_body.end_of_stream:
                            x.finish_json()
                            self.settle(x, "ok" if x.status < 400 else "error")
                    yield CONTINUE_RESP_BODY
                elif kind == "request_trailers":
                    yield CONTINUE_REQ_TRAILERS
                elif kind == "response_trailers":
                    if x.reservation is not None:
                        x.finish_json()
                        self.settle(x, "ok" if x.status < 400 else "error")
                    yield CONTINUE_RESP_TRAILERS
        finally:
            # Envoy closed the stream before the response ended: the client left (or a timeout hit).
            self.settle(x, "cancelled")

    # ---- request ------------------------------------------------------------------------------

    def meters(self, h: dict[str, str]) -> bool:
        path = h.get(":path", "").split("?", 1)[0].rstrip("/")
        return self.enabled and h.get(":method") == "POST" and path.endswith(METERED)

    def on_request(self, x: Exchange) -> pb.ProcessingResponse:
        try:
            body = json.loads(x.body)
        except ValueError:
            return refusal(400, "Headroom: the request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("model"), str) or not body["model"]:
            return refusal(400, "Headroom: the request names no model", "invalid_request_error")
        scope = self.config.who(x.headers)
        if not scope["tenant"]:
            return refusal(403, "Headroom: this key names no tenant", "permission_error")
        model, region = self.config.scope(body["model"])
        if not region:
            return refusal(500, f"Headroom: no region for {body['model']!r} (models or HEADROOM_REGION)", "api_error")
        out_est = body.get("max_completion_tokens", body.get("max_tokens"))
        if out_est is not None and (isinstance(out_est, bool) or not isinstance(out_est, int) or out_est < 0):
            return refusal(400, "max_tokens must be a whole number", "invalid_request_error")
        request_id = x.headers.get("x-request-id", "")
        if not request_id:
            return refusal(500, "Headroom: Envoy gave this request no x-request-id", "api_error")
        x.prompt_est = estimate_prompt(body)
        args = {"request_id": request_id, "tenant": scope["tenant"], "project": scope["project"], "model": model,
                "region": region, "traffic_class": scope["traffic_class"], "prompt_tokens": x.prompt_est,
                "max_output_tokens": out_est}  # fmt: skip
        try:
            d, adm = self.lazy.reserve(**args)
        except ValueError as exc:  # library mode's InvalidRequest
            return refusal(400, f"Headroom: {exc}", "invalid_request_error")
        if d.get("decision") == "throttle":
            return throttle(d)
        if d.get("decision") != "admit":  # HTTP mode's 400: the field it names
            return refusal(400, f"Headroom refused the request: {json.dumps(d)}", "invalid_request_error")
        if d.get("settled"):  # a replayed request id whose reservation is settled: never served twice
            return refusal(409, "Headroom: this request id was already served and settled", "invalid_request_error")
        x.quota = ha.quota_headers(d)
        if adm is not None:  # else admitted by the fail mode: nothing to complete
            x.reservation, x.adm = d["reservation_id"], adm
        return CONTINUE_REQ_BODY

    # ---- response -----------------------------------------------------------------------------

    def on_response_headers(self, x: Exchange, hs: Any) -> pb.ProcessingResponse:
        if x.reservation is None and not x.quota:
            return CONTINUE_RESP_HEADERS
        h = _headers(hs)
        try:
            x.status = int(h.get(":status", "200"))
        except ValueError:
            x.status = 200
        x.sse = h.get("content-type", "").startswith("text/event-stream")
        if not x.quota:
            return CONTINUE_RESP_HEADERS
        mut = pb.HeaderMutation(set_headers=[_hvo(k, v) for k, v in x.quota.items()])
        return pb.ProcessingResponse(
            response_headers=pb.HeadersResponse(response=pb.CommonResponse(header_mutation=mut))
        )

    def settle(self, x: Exchange, status: str) -> None:
        """Complete the reservation once, in a worker thread (never on the event loop, never awaited:
        a cancelled stream cannot await)."""
        if x.reservation is None or x.settled:
            return
        x.settled = True
        u = x.usage or {}
        prompt, output = u.get("prompt_tokens"), u.get("completion_tokens")
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") if isinstance(u, dict) else None
        if not isinstance(prompt, int) or not isinstance(output, int):  # no usage: the estimate and what streamed
            prompt, output, cached = x.prompt_est, x.chunks, None
        if not isinstance(cached, int) or not 0 < cached <= prompt:
            cached = None
        now = time.monotonic()
        ttft = (x.first_byte - x.started) * 1000 if x.first_byte is not None else None
        args = {"prompt_tokens": prompt, "output_tokens": output, "status": status, "cached_prompt_tokens": cached,
                "ttft_ms": ttft, "e2e_ms": (now - x.started) * 1000}  # fmt: skip
        # Never on the event loop: the last response-body message's answer (the client's last bytes)
        # and every other stream would wait for the Redis or portal round trip (measured: 1.15 × the
        # requests/s of completing on the loop, interleaved A/B at 8 clients).
        self.pool.submit(self._complete, x.adm, x.reservation, args)

    @staticmethod
    def _complete(adm: Any, reservation_id: str, args: dict[str, Any]) -> None:
        try:
            adm.complete(reservation_id, **args)
        except Exception:  # never fail the client's answer over a settlement: the TTL settles it
            log.warning("Headroom: complete of %s failed; its TTL will settle it", reservation_id, exc_info=True)


if __name__ == "__main__":  # the serving (uvloop, processes) is integrations.envoy.server's
    from integrations.envoy.server import main

    main()
