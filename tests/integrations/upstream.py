"""A small OpenAI-compatible model server for the gateway tests and benches (issue 37): the
upstream that LiteLLM and Envoy sit in front of. Run as its own process:

    .venv/bin/python -m tests.integrations.upstream --port 9000 [--log usage.jsonl]

`POST /v1/chat/completions` answers with a `usage` block that the test can predict and that is
deliberately not what a gateway estimates:
- prompt_tokens = the words of every message's content + 3 per message (a chat template's cost),
- completion_tokens = `max_tokens` (or `max_completion_tokens`, default 16), or K when a message
  says `short:K`,
- with `"stream": true` one SSE chunk per output token (paced by `delay:MS` in a message), then,
  with `stream_options.include_usage`, a last chunk carrying `usage`, then `[DONE]`.
`--ttfb-ms MS` holds every answer back that long before its first byte (a model's time to first
token, for the benches); a message's `wait:MS` holds that one answer back, logging its arrival first
(`finished` false, `sent` 0: the test knows it reached the upstream). A message's `id:TAG` names the request in the log: one JSON line per answer, `{"tag", "usage",
"stream", "finished", "sent"}` (`finished` false when the client left mid-stream).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

MARK = re.compile(r"\b(id|short|delay|wait):(\S+)")


def text_of(body: dict[str, Any]) -> list[str]:
    out = []
    for m in body.get("messages") or ():
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        out.append(c if isinstance(c, str) else "")
    return out


def usage_for(body: dict[str, Any]) -> tuple[dict[str, int], dict[str, str]]:
    texts = text_of(body)
    marks = dict(MARK.findall(" ".join(texts)))
    prompt = sum(len(t.split()) for t in texts) + 3 * len(texts)
    n = body.get("max_completion_tokens") or body.get("max_tokens") or 16
    if "short" in marks:
        n = min(int(n), int(marks["short"]))
    return {"prompt_tokens": prompt, "completion_tokens": int(n), "total_tokens": prompt + int(n)}, marks


def make_app(log_path: str | None, ttfb_ms: float = 0.0) -> Starlette:
    log = open(log_path, "a", buffering=1) if log_path else None  # noqa: SIM115 - open for the process's life

    def record(tag: str | None, usage: dict[str, int], stream: bool, finished: bool, sent: int) -> None:
        if log is not None and tag:
            log.write(
                json.dumps({"tag": tag, "usage": usage, "stream": stream, "finished": finished, "sent": sent}) + "\n"
            )

    async def chat(request: Request) -> Any:
        body = await request.json()
        if ttfb_ms:
            await asyncio.sleep(ttfb_ms / 1000)
        usage, marks = usage_for(body)
        tag = marks.get("id")
        if "wait" in marks:
            record(tag, usage, bool(body.get("stream")), False, 0)
            await asyncio.sleep(float(marks["wait"]) / 1000)
        model = body.get("model", "upstream")
        created = int(time.time())
        n = usage["completion_tokens"]
        if not body.get("stream"):
            record(tag, usage, False, True, n)
            return JSONResponse({
                "id": f"cmpl-{tag}", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": " ".join(f"t{i}" for i in range(n))}}],
                "usage": usage,
            })  # fmt: skip
        delay = float(marks.get("delay", 0)) / 1000
        with_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        async def chunks() -> Any:
            sent = 0
            try:
                for i in range(n):
                    c = {"id": f"cmpl-{tag}", "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": f"t{i} "},
                                      "finish_reason": "length" if i == n - 1 else None}]}  # fmt: skip
                    yield f"data: {json.dumps(c)}\n\n"
                    sent += 1
                    if delay:
                        await asyncio.sleep(delay)
                if with_usage:
                    u = {"id": f"cmpl-{tag}", "object": "chat.completion.chunk", "created": created, "model": model,
                         "choices": [], "usage": usage}  # fmt: skip
                    yield f"data: {json.dumps(u)}\n\n"
                yield "data: [DONE]\n\n"
                record(tag, usage, True, True, sent)
            except (asyncio.CancelledError, GeneratorExit):
                record(tag, usage, True, False, sent)
                raise

        return StreamingResponse(chunks(), media_type="text/event-stream")

    async def models(request: Request) -> Any:
        return JSONResponse({"object": "list", "data": [{"id": "upstream", "object": "model"}]})

    return Starlette(routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]), Route("/chat/completions", chat, methods=["POST"]),
        Route("/v1/models", models), Route("/health", models),
    ])  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log")
    ap.add_argument("--ttfb-ms", type=float, default=0.0)
    args = ap.parse_args()
    # Idle keep-alive connections kept 75 s: uvicorn's default (5 s) closes them between a bench's rounds
    # while the gateway may be reusing one (an Envoy 503 or a LiteLLM connection error now and then).
    uvicorn.run(make_app(args.log, args.ttfb_ms), host="127.0.0.1", port=args.port, log_level="warning",
                access_log=False, timeout_keep_alive=75)  # fmt: skip


if __name__ == "__main__":
    main()
