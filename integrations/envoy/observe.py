"""The second ext_proc filter's streams (issue 49.3): the response read off the request's critical path.

envoy.yaml runs the ext_proc filter twice. The first (blocking) stream is the reserve alone: its reply to
the request body carries what the rest of the request needs as Envoy dynamic metadata in the `headroom`
namespace (`reply_metadata`): the remaining-quota headers (the route adds them to the answer with
`%DYNAMIC_METADATA(headroom:<header>)%`) and, for a reservation to settle, its id (`rid`), the prompt
estimate (`est`) and the wall-clock time it was admitted (`t0`). The second filter runs in
`observability_mode` (Envoy sends it each message and goes on without waiting: no message of it is on
the request's path) and forwards the `headroom` namespace with each message (`metadata_options.
forwarding_namespaces`), so the stream that settles needs nothing from the one that reserved: they may be
served by different processes (`--processes N`).

Its messages: the request body (observability mode streams it after the first filter's reply: the
metadata is there, and the stream opens while the request is still on its way, so a client that leaves
before the first byte is seen too), the response headers (status, content type), the response body
chunks. Settled once: `ok` (`error` for a status >= 400) at the body's end with the answer's `usage` (a
server-sent-event stream: its last chunk's), else the estimate and the content chunks seen; `cancelled`
when the stream ends before the body did (Envoy closes an observability stream `deferred_close_timeout`
after the request ended: the client left, or a timeout hit). A request with no reservation (throttled,
not metered, admitted by the fail mode) ends its observer stream at the first message.
"""

from __future__ import annotations

import json
import time
from typing import Any

from google.protobuf import struct_pb2
from grpc.aio import EOF

NS = "headroom"  # the dynamic metadata namespace both filters share (envoy.yaml: receiving / forwarding)
MAX_BODY = 8 << 20  # a JSON answer larger than this is not parsed for usage (a stream is parsed line by line)


def reply_metadata(quota: dict[str, str], rid: str | None, est: int) -> struct_pb2.Struct:
    """The reserve reply's dynamic metadata: {"headroom": {quota headers…, rid, est, t0}}."""
    V = struct_pb2.Value  # noqa: N806 - protobuf's class
    f = {k: V(string_value=v) for k, v in quota.items()}
    if rid is not None:
        f["rid"], f["est"], f["t0"] = V(string_value=rid), V(number_value=est), V(number_value=time.time())
    return struct_pb2.Struct(fields={NS: V(struct_value=struct_pb2.Struct(fields=f))})


class Exchange:
    """One admitted request's response, as the observer stream sees it."""

    __slots__ = ("reservation", "prompt_est", "started", "first_byte", "status", "sse", "resp", "usage", "chunks",
                 "settled")  # fmt: skip

    def __init__(self, reservation: str, prompt_est: int, started: float) -> None:
        self.reservation = reservation
        self.prompt_est = prompt_est
        self.started = started  # wall clock (time.time()): the reserving process may be another one
        self.first_byte: float | None = None
        self.status = 200
        self.sse = False
        self.resp = bytearray()  # a JSON answer's body; for a stream, the unfinished last line
        self.usage: dict[str, Any] | None = None
        self.chunks = 0
        self.settled = False

    @classmethod
    def of(cls, req: Any) -> Exchange | None:
        """From a message's forwarded metadata; None when the request holds no reservation."""
        md = req.metadata_context.filter_metadata
        if NS not in md:
            return None
        f = md[NS].fields
        if "rid" not in f:
            return None
        return cls(f["rid"].string_value, int(f["est"].number_value), f["t0"].number_value)

    def on_headers(self, hs: Any) -> None:
        for h in hs.headers.headers:
            k = h.key
            if k == ":status":
                try:
                    self.status = int(h.raw_value or h.value)
                except ValueError:
                    self.status = 200
            elif k == "content-type":
                self.sse = (h.raw_value or h.value.encode()).startswith(b"text/event-stream")

    def feed(self, chunk: bytes) -> None:
        if self.first_byte is None and chunk:
            self.first_byte = time.time()
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

    def finish(self) -> None:
        if self.sse:
            self.feed(b"\n")
            return
        try:
            u = json.loads(bytes(self.resp)).get("usage")
        except (ValueError, AttributeError):
            return
        if isinstance(u, dict):
            self.usage = u

    def complete_args(self, status: str) -> dict[str, Any]:
        """The complete's arguments: the upstream's usage, else the estimate and the chunks streamed."""
        u = self.usage or {}
        prompt, output = u.get("prompt_tokens"), u.get("completion_tokens")
        cached = (u.get("prompt_tokens_details") or {}).get("cached_tokens") if isinstance(u, dict) else None
        if not isinstance(prompt, int) or not isinstance(output, int):
            prompt, output, cached = self.prompt_est, self.chunks, None
        if not isinstance(cached, int) or not 0 < cached <= prompt:
            cached = None
        ttft = (self.first_byte - self.started) * 1000 if self.first_byte is not None else None
        return {"prompt_tokens": prompt, "output_tokens": output, "status": status, "cached_prompt_tokens": cached,
                "ttft_ms": ttft, "e2e_ms": max(0.0, (time.time() - self.started) * 1000)}  # fmt: skip


async def observe(first: Any, read: Any, settle: Any) -> None:
    """An observer stream from its `first` message on (`read()`: the next, or grpc.aio.EOF); `settle(x,
    status)` completes the reservation (once). Nothing is answered: Envoy ignores an observer's replies."""
    x = Exchange.of(first)
    if x is None:
        return  # nothing to settle: ending the stream stops Envoy sending the rest
    try:
        req = first
        while True:
            kind = req.WhichOneof("request")
            if kind == "response_headers":
                x.on_headers(req.response_headers)
                if req.response_headers.end_of_stream:
                    settle(x, "ok" if x.status < 400 else "error")
                    return
            elif kind == "response_body":
                x.feed(req.response_body.body)
                if req.response_body.end_of_stream:
                    x.finish()
                    settle(x, "ok" if x.status < 400 else "error")
                    return
            elif kind == "response_trailers":
                x.finish()
                settle(x, "ok" if x.status < 400 else "error")
                return
            req = await read()
            if req is EOF:
                return
    finally:
        settle(x, "cancelled")  # a no-op once settled; else Envoy closed the stream before the body ended
