"""Headroom admission inside the LiteLLM proxy (issue 37): a LiteLLM custom callback.

Put this file next to the proxy's `config.yaml` and name it there, as LiteLLM's docs show for a
custom callback (`integrations/litellm/config.yaml` is a complete example):

    litellm_settings:
      callbacks: headroom_callback.handler

For each chat or text completion:
- **reserve** in `async_pre_call_hook`, before LiteLLM picks a deployment: the tenant, project and
  traffic class from the LiteLLM key (see `who()`: the key's metadata, else its team's metadata,
  else the team's alias), the Headroom model and region from the model group's deployments
  (`model_info: {headroom_model, headroom_region}`, else the group's name and HEADROOM_REGION),
  the prompt counted with LiteLLM's own `litellm.token_counter`, `max_tokens` (or
  `max_completion_tokens`) as the output estimate, LiteLLM's call id as the request id.
- **throttle**: raises LiteLLM's own `litellm.RateLimitError`; the proxy answers 429 with its
  OpenAI-shaped error (`type: throttling_error`, `code: "429"`) whose message names Headroom's
  reason (QUOTA_EXCEEDED, PLATFORM_CAPACITY, ...), the party responsible and the wait, with the
  headers `Retry-After` (when a retry can pass), `x-headroom-reason`, `x-headroom-responsible` and
  the remaining-quota headers (`x-ratelimit-*`) when Headroom's answer carries them.
- **complete** in `async_log_success_event` with the `usage` LiteLLM reports for the call (for a
  stream, the assembled response's usage: the upstream's last chunk when it sent one, else LiteLLM's
  count), `async_log_failure_event` as `error`, and a stream the client left mid-way as
  `cancelled` (`async_post_call_streaming_iterator_hook` sees the stream end early), charged the
  prompt estimate and the content chunks that were sent. A reservation is completed once.

Mode, from the environment (LiteLLM's `environment_variables:` block in config.yaml sets them too):
- library mode (no HTTP hop: the same Lua scripts on the same Redis as the portal, decisions made in
  the proxy's process, events batched to the portal) when HEADROOM_REDIS_URL is set; it needs
  HEADROOM_SIGNING_KEY (the portal's ADMISSION_SIGNING_KEY) and, if the portal's store uses one,
  HEADROOM_KEY_PREFIX (the portal's ADMISSION_KEY_PREFIX, default `adm:`);
- HTTP mode otherwise (`POST /api/v1/admission/reserve` and `…/complete` on HEADROOM_URL), with the
  client's fail mode when the portal cannot be reached (reserved and shared admitted, best_effort
  refused).
Both need HEADROOM_URL and HEADROOM_GATEWAY_TOKEN (a token of a user with the gateway role).
Optional: HEADROOM_REGION (when a deployment names none), HEADROOM_TRAFFIC_CLASS (default
`shared`), HEADROOM_TIMEOUT_S (HTTP mode, default 0.25), HEADROOM_EVENT_SOURCE (library mode's
event source, default `litellm`), HEADROOM_REDIS_TIMEOUT_S (0.3) and HEADROOM_HTTP_TIMEOUT_S (the
snapshot and events calls, 5), HEADROOM_ENABLED=0 (the hook does nothing: a kill switch).
Library mode reads the portal's snapshot on the first request; until it has one (the portal is
down) the HTTP client's fail mode applies, and the next request tries again.

The admission package (`admission/library.py`, `admission/client.py`: standard library and redis-py,
no Django) must be importable: run the proxy with the Headroom checkout on PYTHONPATH.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
import types
from collections import OrderedDict
from datetime import datetime
from typing import Any

import litellm
from fastapi import HTTPException
from litellm.integrations.custom_logger import CustomLogger

from integrations import headroom_admission as ha

log = logging.getLogger("headroom.litellm")

CALL_TYPES = ("completion", "acompletion", "text_completion", "atext_completion")  # the proxy passes the async names
META = "headroom"  # the key the reservation is kept under in the request's metadata
MAX_INFLIGHT = 100_000  # reservations remembered between pre-call and callback (oldest forgotten)


def _meta(d: Any) -> dict[str, Any]:
    return d if isinstance(d, dict) else {}


def who(key: Any, *, default_class: str = "shared") -> dict[str, Any]:
    """The Headroom tenant, project and traffic class of a LiteLLM key (a UserAPIKeyAuth).

    Looked up in this order, the first that names one wins:
      1. the key's metadata: `headroom_tenant`, `headroom_project`, `headroom_traffic_class`
         (`/key/generate {"metadata": {"headroom_tenant": "acme", ...}}`),
      2. the key's team's metadata, the same names (`/team/new {"metadata": {...}}`),
      3. the tenant only: the team's alias (a team named after its tenant).
    A key with none of these has no tenant: the request is refused (403), never let through unmetered.
    """
    km, tm = _meta(getattr(key, "metadata", None)), _meta(getattr(key, "team_metadata", None))

    def pick(name: str) -> Any:
        return km.get(f"headroom_{name}") or tm.get(f"headroom_{name}")

    return {
        "tenant": pick("tenant") or getattr(key, "team_alias", None),
        "project": pick("project"),
        "traffic_class": pick("traffic_class") or default_class,
    }


def deployment_scope(model_group: str, *, default_region: str | None) -> tuple[str, str | None, str]:
    """(Headroom model, region, tokenizer model) for a LiteLLM model group, from its deployments'
    `model_info` (`headroom_model`, `headroom_region`, `headroom_tokenizer`). Every deployment of a
    group must name the same model and region: one admission scope lives in one pool."""
    from litellm.proxy import proxy_server

    router = getattr(proxy_server, "llm_router", None)
    deps = router.get_model_list(model_name=model_group) if router is not None else None
    seen = set()
    tokenizer = model_group
    for d in deps or ():
        info = _meta(d.get("model_info"))
        seen.add((info.get("headroom_model") or model_group, info.get("headroom_region") or default_region))
        tokenizer = info.get("headroom_tokenizer") or tokenizer
    if len(seen) > 1:
        raise HTTPException(500, detail=f"Headroom: the deployments of {model_group!r} name different models or "
                                        f"regions {sorted(seen, key=str)}; a model group must be one scope")  # fmt: skip
    model, region = seen.pop() if seen else (model_group, default_region)
    return model, region, tokenizer


def count_prompt(tokenizer: str, data: dict[str, Any]) -> int:
    """Prompt tokens as LiteLLM counts them (`litellm.token_counter`)."""
    if data.get("messages") is not None:
        return int(litellm.token_counter(model=tokenizer, messages=data["messages"]))
    prompt = data.get("prompt")
    if isinstance(prompt, list):
        prompt = " ".join(p for p in prompt if isinstance(p, str))
    return int(litellm.token_counter(model=tokenizer, text=prompt or ""))


def make_admission() -> Any:
    """Library mode when HEADROOM_REDIS_URL is set, else the HTTP client (see the module docstring):
    integrations/headroom_admission.py, shared with the Envoy ext_proc; events sourced `litellm`."""
    return ha.make_admission("litellm")


def rate_limit_error(d: dict[str, Any], model: str) -> litellm.RateLimitError:
    """LiteLLM's own 429, carrying Headroom's throttle answer: the message names the reason, the
    headers say it again with Retry-After and the remaining-quota headers."""
    msg = ha.throttle_message(d)
    e = litellm.RateLimitError(message=msg, llm_provider="headroom", model=model)
    e.message = msg  # LiteLLM prefixes its own name; the client reads Headroom's words
    e.headers = ha.throttle_headers(d)  # Retry-After, x-headroom-*, the remaining quota (x-ratelimit-*)
    return e


class HeadroomAdmission(CustomLogger):
    def __init__(self, admission: Any = None) -> None:
        super().__init__()
        self._admission = admission
        self._lock = threading.Lock()
        self._inflight: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self.enabled = os.environ.get("HEADROOM_ENABLED", "1").lower() not in ("0", "false", "no", "off")

    @property
    def admission(self) -> Any:
        """Built on first use, so the proxy starts even while the portal does (library mode reads
        the snapshot when it is built)."""
        if self._admission is None:
            with self._lock:
                if self._admission is None:
                    self._admission = make_admission()
        return self._admission

    # ---- reserve ------------------------------------------------------------------------------

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: str) -> Any:
        if not self.enabled or call_type not in CALL_TYPES:
            return data
        group = data.get("model")
        if not isinstance(group, str) or not group:
            return data  # LiteLLM refuses a request without a model itself
        scope = who(user_api_key_dict, default_class=os.environ.get("HEADROOM_TRAFFIC_CLASS", "shared"))
        if not scope["tenant"]:
            raise HTTPException(403, detail="Headroom: this key names no tenant (key or team metadata "
                                            "headroom_tenant, or a team alias)")  # fmt: skip
        model, region, tokenizer = deployment_scope(group, default_region=os.environ.get("HEADROOM_REGION"))
        if not region:
            raise HTTPException(500, detail=f"Headroom: no region for {group!r} (model_info.headroom_region or "
                                            "HEADROOM_REGION)")  # fmt: skip
        out_est = data.get("max_completion_tokens", data.get("max_tokens"))
        if out_est is not None and (isinstance(out_est, bool) or not isinstance(out_est, int) or out_est < 0):
            raise HTTPException(400, detail="max_tokens must be a whole number")
        prompt = count_prompt(tokenizer, data)
        request_id = str(data.get("litellm_call_id") or "")
        if not request_id:
            raise HTTPException(500, detail="Headroom: LiteLLM gave this call no litellm_call_id")
        args = {"request_id": request_id, "tenant": scope["tenant"], "project": scope["project"], "model": model,
                "region": region, "traffic_class": scope["traffic_class"], "prompt_tokens": prompt,
                "max_output_tokens": out_est}  # fmt: skip
        try:
            adm = await asyncio.to_thread(lambda: self.admission)
        except Exception as exc:  # library mode could not read the portal's snapshot: the client's fail mode
            log.warning("Headroom: admission unavailable (%s): applying the %s fail mode", exc, args["traffic_class"])
            adm = None
            d = ha.fail_mode(args["traffic_class"])
        if adm is not None:
            try:
                d = await asyncio.to_thread(adm.reserve, **args)
            except ValueError as exc:  # library mode's InvalidRequest: a field out of range
                raise HTTPException(400, detail=f"Headroom: {exc}") from exc
        if d.get("decision") == "throttle":
            if ha.throttle_status(d) != 429:  # Headroom refused the gateway itself (its token): not a rate limit
                raise HTTPException(ha.throttle_status(d), detail=ha.throttle_message(d))
            raise rate_limit_error(d, group)
        if d.get("decision") != "admit":  # HTTP mode's 400: the field it names
            raise HTTPException(400, detail=f"Headroom refused the request: {d}")
        if d.get("settled"):  # a replayed call id whose reservation is already settled: never served twice
            raise HTTPException(409, detail="Headroom: this request id was already served and settled")
        if adm is None:
            return data  # admitted by the fail mode: nothing to complete
        rec = {"reservation_id": d["reservation_id"], "prompt_tokens": prompt, "chunks": 0, "source": d.get("source")}
        with self._lock:
            self._inflight[request_id] = rec
            while len(self._inflight) > MAX_INFLIGHT:  # never completed: the reservation's TTL settles it
                self._inflight.popitem(last=False)
        meta = data.setdefault("metadata", {}) if isinstance(data.get("metadata", {}), dict) else {}
        meta[META] = {"reservation_id": d["reservation_id"], "source": d.get("source")}
        return data

    # ---- complete -----------------------------------------------------------------------------

    def _take(self, call_id: str | None) -> dict[str, Any] | None:
        if not call_id:
            return None
        with self._lock:
            return self._inflight.pop(call_id, None)

    def _settle(
        self, rec: dict[str, Any], status: str, usage: Any, ttft_ms: float | None, e2e_ms: float | None
    ) -> None:
        prompt = getattr(usage, "prompt_tokens", None)
        output = getattr(usage, "completion_tokens", None)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None) if details is not None else None
        if not isinstance(prompt, int) or not isinstance(output, int):  # no usage: the estimate and what streamed
            prompt, output, cached = rec["prompt_tokens"], rec["chunks"], None
        if isinstance(cached, int) and not 0 <= cached <= prompt:
            cached = None
        try:
            self.admission.complete(rec["reservation_id"], prompt_tokens=prompt, output_tokens=output, status=status,
                                    cached_prompt_tokens=cached or None, ttft_ms=ttft_ms, e2e_ms=e2e_ms)  # fmt: skip
        except Exception:  # never fail the caller's response over a settlement: the TTL settles it
            log.warning("Headroom: complete of %s failed; its TTL will settle it", rec["reservation_id"], exc_info=True)

    @staticmethod
    def _ms(a: Any, b: Any) -> float | None:
        if isinstance(a, datetime) and isinstance(b, datetime):
            return max(0.0, (b - a).total_seconds() * 1000)
        return None

    async def async_log_success_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        rec = self._take(kwargs.get("litellm_call_id"))
        if rec is None:
            return
        usage = getattr(response_obj, "usage", None)
        ttft = self._ms(start_time, kwargs.get("completion_start_time"))
        await asyncio.to_thread(self._settle, rec, "ok", usage, ttft, self._ms(start_time, end_time))

    async def async_log_failure_event(self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any) -> None:
        rec = self._take(kwargs.get("litellm_call_id"))
        if rec is None:
            return
        await asyncio.to_thread(self._settle, rec, "error", None, None, self._ms(start_time, end_time))

    async def async_post_call_streaming_iterator_hook(self, user_api_key_dict: Any, response: Any,
                                                      request_data: dict) -> Any:  # fmt: skip
        """Pass the stream through, counting content chunks. A client that leaves mid-stream is
        noticed (see `client_gone`) at the next chunk: the stream stops there, the upstream's
        stream is closed, and the reservation is settled `cancelled` with the prompt estimate and
        the chunks sent. (The proxy's server drops writes to a closed connection silently, so
        without this the upstream would be read to its end and billed as a whole answer.)"""
        call_id = request_data.get("litellm_call_id")
        with self._lock:
            rec = self._inflight.get(call_id) if call_id else None
        if rec is None:
            async for item in response:
                yield item
            return
        started = time.monotonic()
        gone: asyncio.Task | None = None
        looks = 0
        finished = False
        try:
            async for item in response:
                if gone is None and looks < 8:  # the proxy reads the first chunk before it starts the response
                    looks += 1
                    gone = client_gone()
                elif gone is not None and gone.done():
                    break
                for choice in getattr(item, "choices", None) or ():
                    delta = getattr(choice, "delta", None)
                    if getattr(delta, "content", None):
                        rec["chunks"] += 1
                yield item
            else:
                finished = True
        finally:
            if gone is not None:
                gone.cancel()
            if not finished:
                taken = self._take(call_id)
                if taken is not None:
                    e2e = (time.monotonic() - started) * 1000
                    # Not awaited: a cancelled task cannot await; the settlement runs in a worker thread.
                    threading.Thread(target=self._settle, args=(taken, "cancelled", None, None, e2e),
                                     name="headroom-cancel", daemon=True).start()  # fmt: skip
                aclose = getattr(response, "aclose", None)
                if aclose is not None and (gone is None or gone.done()):
                    with contextlib.suppress(Exception):
                        await aclose()  # stop reading the upstream: it may stop generating


def client_gone() -> asyncio.Task | None:
    """A task that ends when the client of the response being streamed disconnects, or None.

    The ASGI `receive` of the streaming response is found on the stack (Starlette's
    StreamingResponse.__call__, which the proxy's stream runs under); once the request body is read,
    its next message is `http.disconnect`. With ASGI spec 2.4 servers (uvicorn) Starlette no longer
    listens for it itself, and the server discards what is sent after it."""
    f: types.FrameType | None = sys._getframe(1)
    receive = None
    while f is not None:
        if f.f_code.co_name == "__call__" and type(f.f_locals.get("self")).__name__ == "StreamingResponse":
            receive = f.f_locals.get("receive")
            break
        f = f.f_back
    if receive is None:
        return None

    async def watch() -> None:
        while True:
            msg = await receive()
            if msg.get("type") == "http.disconnect":
                return

    return asyncio.ensure_future(watch())


handler = HeadroomAdmission()
