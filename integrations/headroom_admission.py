"""What Headroom's gateway plug-ins share (issue 37): the LiteLLM callback (integrations/litellm/) and
the Envoy external processor (integrations/envoy/).

- `make_admission(source)`: library mode (`admission/library.py`: the portal's Lua scripts on the
  portal's Redis, no HTTP hop, events batched to the portal under `source`) when HEADROOM_REDIS_URL
  is set, else the HTTP client (`admission/client.py`: `POST /api/v1/admission/reserve` and
  `…/complete`, with its fail mode when the portal cannot be reached). Both need HEADROOM_URL and
  HEADROOM_GATEWAY_TOKEN; library mode needs HEADROOM_SIGNING_KEY and, when the portal's store uses
  one, HEADROOM_KEY_PREFIX. Optional: HEADROOM_TIMEOUT_S (HTTP mode, 0.25), HEADROOM_EVENT_SOURCE,
  HEADROOM_REDIS_TIMEOUT_S (0.3), HEADROOM_HTTP_TIMEOUT_S (snapshot and events calls, 5),
  HEADROOM_RECORD_SECRET.
- `LazyAdmission`: builds it on first use (library mode reads the portal's snapshot when built, so a
  gateway starts even while the portal does); `reserve()` applies the HTTP client's fail mode
  (`reserved`/`shared` admitted, `best_effort` refused ADMISSION_UNAVAILABLE) while it cannot be built.
- `throttle_message(d)`, `throttle_status(d)` and `throttle_headers(d)`: the words, status (429; 503 when
  the refusal is the gateway's own: GATEWAY_TOKEN_REFUSED, GATEWAY_MISCONFIGURED) and headers a client
  gets for a throttle: `Retry-After` (when a retry can pass), `x-headroom-reason`, `x-headroom-responsible`
  and the remaining-quota headers (`x-ratelimit-*`, `x-headroom-budget-*`) Headroom answered.
- `quota_headers(d)`: those headers for an admitted answer, with `x-headroom-served-from: <pool>` when the
  request spilled over to another pool.
- `EVENTS`: a count per event the HTTP client reports (`gateway_token_refused`), for the gateway's metrics.
- `enabled()`: HEADROOM_ENABLED=0 turns a plug-in off (a kill switch).

Standard library only; the admission package it loads is standard library and redis-py (no Django).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from typing import Any

log = logging.getLogger("headroom.gateway")
EVENTS: Counter[str] = Counter()
SERVED_FROM = "x-headroom-served-from"


def count_event(event: dict[str, Any]) -> None:
    EVENTS[str(event.get("event"))] += 1


def enabled() -> bool:
    return os.environ.get("HEADROOM_ENABLED", "1").lower() not in ("0", "false", "no", "off")


def make_admission(source: str) -> Any:
    """Library mode when HEADROOM_REDIS_URL is set, else the HTTP client (see the module docstring)."""
    env = os.environ
    url, token = env["HEADROOM_URL"], env["HEADROOM_GATEWAY_TOKEN"]
    if env.get("HEADROOM_REDIS_URL"):
        from admission.library import Library

        return Library(
            url, token, signing_key=env["HEADROOM_SIGNING_KEY"], redis_url=env["HEADROOM_REDIS_URL"],
            record_secret=env.get("HEADROOM_RECORD_SECRET") or None, prefix=env.get("HEADROOM_KEY_PREFIX", "adm:"),
            source=env.get("HEADROOM_EVENT_SOURCE", source),
            redis_timeout_s=float(env.get("HEADROOM_REDIS_TIMEOUT_S", "0.3")),
            http_timeout_s=float(env.get("HEADROOM_HTTP_TIMEOUT_S", "5")),
        )  # fmt: skip
    from admission.client import AdmissionClient

    return AdmissionClient(url, token, timeout_s=float(env.get("HEADROOM_TIMEOUT_S", "0.25")), on_event=count_event)


def fail_mode(traffic_class: str) -> dict[str, Any]:
    """The HTTP client's answer when Headroom cannot be reached (docs/contract.md §5's store-down rule)."""
    from admission import client

    return client.fail_mode(traffic_class)


class LazyAdmission:
    """The admission object, built on first use by `make_admission(source)` (or given)."""

    def __init__(self, source: str, admission: Any = None) -> None:
        self.source = source
        self._admission = admission
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self._admission is None:
            with self._lock:
                if self._admission is None:
                    self._admission = make_admission(self.source)
        return self._admission

    def reserve(self, **args: Any) -> tuple[dict[str, Any], Any]:
        """(answer, the admission object that gave it, or None when the fail mode answered: then there
        is nothing to complete). A ValueError (library mode's InvalidRequest: a field out of range)
        propagates: the caller answers 400."""
        try:
            adm = self.get()
        except Exception as exc:  # library mode could not read the portal's snapshot: the client's fail mode
            log.warning("Headroom: admission unavailable (%s): applying the %s fail mode", exc, args["traffic_class"])
            return fail_mode(args["traffic_class"]), None
        return adm.reserve(**args), adm


def throttle_message(d: dict[str, Any]) -> str:
    if d.get("message"):  # a refusal of the gateway itself (admission.client.refusal): its own words
        return f"Headroom: {d['reason']}: {d['message']}"
    reason, responsible, wait = d.get("reason") or "THROTTLED", d.get("responsible") or "", d.get("retry_after_s")
    return f"Headroom: {reason} ({responsible})" + (f", retry after {wait} s" if wait is not None else "")


def throttle_status(d: dict[str, Any]) -> int:
    return int(d.get("gateway_status") or 429)


def throttle_headers(d: dict[str, Any]) -> dict[str, str]:
    """Lower-case header names → values for a throttle answer `d`."""
    headers = {
        "x-headroom-reason": d.get("reason") or "THROTTLED",
        "x-headroom-responsible": d.get("responsible") or "",
    }
    if d.get("retry_after_s") is not None:
        headers["retry-after"] = str(d["retry_after_s"])
    headers.update(quota_headers(d))
    return headers


def quota_headers(d: dict[str, Any]) -> dict[str, str]:
    """The remaining-quota headers (x-ratelimit-*, x-headroom-budget-*) of a reserve answer, admit or throttle,
    and where a spilled request is served (x-headroom-served-from)."""
    out = {str(k).lower(): str(v) for k, v in (d.get("quota_headers") or {}).items()}
    if d.get("served_from"):
        out[SERVED_FROM] = str(d["served_from"])
    return out
