"""A real small OpenAI-compatible gateway for the library-mode tests (issue 20): a streaming fake
upstream and a proxy (Starlette + httpx) with admission.asgi.AdmissionMiddleware in front, each
served by uvicorn in a thread on its own loopback port.

The upstream answers `POST /v1/chat/completions`: with `"stream": true` one SSE chunk per output
token, then (with `stream_options.include_usage`) a final chunk carrying `usage`, then `[DONE]`;
otherwise one JSON body with `usage`. Output tokens: the body's `max_tokens` (or `fake_tokens`);
prompt tokens: `fake_prompt_tokens` (default 100); `fake_delay_s` paces the chunks.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from admission.asgi import AdmissionMiddleware


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def upstream_app(stats: dict[str, int]) -> Starlette:
    async def chat(request: Request) -> Any:
        body = await request.json()
        n = int(body.get("fake_tokens", body.get("max_tokens") or 5))
        prompt = int(body.get("fake_prompt_tokens", 100))
        delay = float(body.get("fake_delay_s", 0))
        usage = {"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n}
        if not body.get("stream"):
            stats["served"] = stats.get("served", 0) + 1
            return JSONResponse({"id": "cmpl-1", "object": "chat.completion", "usage": usage,
                                 "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]})  # fmt: skip

        async def chunks() -> Any:
            try:
                for i in range(n):
                    c = {"id": "cmpl-1", "object": "chat.completion.chunk",
                         "choices": [{"index": 0, "delta": {"content": f"t{i} "}}]}  # fmt: skip
                    yield f"data: {json.dumps(c)}\n\n"
                    if delay:
                        await asyncio.sleep(delay)
                if (body.get("stream_options") or {}).get("include_usage"):
                    yield f"data: {json.dumps({'id': 'cmpl-1', 'choices': [], 'usage': usage})}\n\n"
                yield "data: [DONE]\n\n"
                stats["streamed"] = stats.get("streamed", 0) + 1
            except (asyncio.CancelledError, GeneratorExit):
                stats["cut"] = stats.get("cut", 0) + 1
                raise

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def proxy_app(upstream_url: str, admission: Any) -> Any:
    """The gateway: forwards the body upstream and streams the answer back as it arrives."""
    client = httpx.AsyncClient(base_url=upstream_url, timeout=60)

    async def chat(request: Request) -> Any:
        up = client.build_request("POST", "/v1/chat/completions", content=await request.body(),
                                  headers={"content-type": "application/json"})  # fmt: skip
        r = await client.send(up, stream=True)
        return StreamingResponse(r.aiter_raw(), status_code=r.status_code,
                                 media_type=r.headers.get("content-type"), background=BackgroundTask(r.aclose))  # fmt: skip

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    return AdmissionMiddleware(app, admission)


class Served:
    """An ASGI app under uvicorn in a daemon thread, for a `with` block."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"uvicorn-{self.port}", daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        for _ in range(1000):  # a hang guard for start-up, not a timing assertion
            if self.server.started:
                return self
            if not self.thread.is_alive():
                break
            time.sleep(0.01)
        raise RuntimeError(f"uvicorn did not start on {self.url}")

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join()
