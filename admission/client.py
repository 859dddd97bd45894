"""A small client for gateways: reserve before a model call, complete after it.

Standard library only (http.client, one keep-alive connection per thread). When the portal
cannot be reached or answers 5xx, the client applies the same fail mode as the portal does
when its store is down: `reserved` and `shared` are admitted locally (source "fail_open"),
`best_effort` is refused with ADMISSION_UNAVAILABLE. Usage:

    client = AdmissionClient("http://portal:8000", token="…")
    d = client.reserve(request_id=rid, tenant="acme", model="llama-3.1-70b", region="us-east",
                       traffic_class="shared", prompt_tokens=812, max_output_tokens=256)
    if d["decision"] == "throttle": return 429 with Retry-After: d["retry_after_s"]
    … call the model …
    client.complete(d["reservation_id"], prompt_tokens=812, output_tokens=201, status="ok", ttft_ms=180, e2e_ms=4100)
"""

from __future__ import annotations

import http.client
import json
import logging
import threading
import uuid
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

FAIL_OPEN_CLASSES = frozenset({"reserved", "shared"})
# The remaining quota (docs/contract.md §5): the portal sends it as these headers; a reserve's answer here
# carries them under QUOTA_KEY (header name → value) for the gateway to pass on to its client.
QUOTA_HEADERS = ("x-ratelimit-", "x-headroom-budget-")
QUOTA_KEY = "quota_headers"
LOCAL_PREFIX = "local-fo-"


class AdmissionClient:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = 0.25) -> None:
        u = urlsplit(base_url)
        self._https = u.scheme == "https"
        self._host = u.hostname or "127.0.0.1"
        self._port = u.port or (443 if self._https else 80)
        self._base = u.path.rstrip("/")
        self._headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.timeout_s = timeout_s
        self._local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        c = getattr(self._local, "conn", None)
        if c is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            c = self._local.conn = cls(self._host, self._port, timeout=self.timeout_s)
        return c

    def _drop(self) -> None:
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
        self._local.conn = None

    def _post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, out, _ = self._post_h(path, body)
        return status, out

    def _post_h(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, the remaining-quota headers: x-ratelimit-*, x-headroom-budget-*)."""
        data = json.dumps(body, separators=(",", ":")).encode()
        for attempt in (1, 2):
            try:
                c = self._conn()
                c.request("POST", self._base + path, body=data, headers=self._headers)
                r = c.getresponse()
                raw = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self._drop()
                quota = {k.lower(): v for k, v in r.getheaders() if k.lower().startswith(QUOTA_HEADERS)}
                return r.status, json.loads(raw) if raw else {}, quota
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A kept-alive connection the server already closed: one fresh try.
                self._drop()
                if attempt == 2:
                    raise
            except Exception:
                self._drop()
                raise
        raise AssertionError("unreachable")

    def reserve(
        self, *, request_id: str, tenant: str, model: str, region: str, traffic_class: str, prompt_tokens: int,
        cached_prompt_tokens: int | None = None, max_output_tokens: int | None = None, project: str | None = None,
        overflow: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """`overflow`: "allow" | "deny" spillover for this request (issue 36.1); None: the entitlement's default."""
        body: dict[str, Any] = {
            "request_id": request_id, "tenant": tenant, "model": model, "region": region,
            "traffic_class": traffic_class, "prompt_tokens": prompt_tokens,
        }  # fmt: skip
        for k, v in (("cached_prompt_tokens", cached_prompt_tokens), ("max_output_tokens", max_output_tokens),
                     ("project", project), ("overflow", overflow)):  # fmt: skip
            if v is not None:
                body[k] = v
        try:
            status, out, quota = self._post_h("/api/v1/admission/reserve", body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            log.warning("admission unreachable (%s): applying the %s fail mode", exc, traffic_class)
            return self._fail_mode(traffic_class)
        if status in (200, 429, 400):
            if quota:
                out[QUOTA_KEY] = quota  # as admission.library answers: a gateway swaps modes by one object
            return out
        log.warning("admission answered %s: applying the %s fail mode", status, traffic_class)
        return self._fail_mode(traffic_class)

    @staticmethod
    def _fail_mode(traffic_class: str) -> dict[str, Any]:
        if traffic_class in FAIL_OPEN_CLASSES:
            return {"decision": "admit", "reservation_id": LOCAL_PREFIX + uuid.uuid4().hex, "reserved_wt": None,
                    "source": "fail_open", "expires_at": None}  # fmt: skip
        return {"decision": "throttle", "reason": "ADMISSION_UNAVAILABLE", "responsible": "platform",
                "retry_after_s": 5}  # fmt: skip

    def complete(
        self, reservation_id: str, *, prompt_tokens: int, output_tokens: int, status: str = "ok",
        cached_prompt_tokens: int | None = None, ttft_ms: float | None = None, e2e_ms: float | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        """None when the portal could not be told; the reservation's TTL then settles it."""
        if reservation_id.startswith(LOCAL_PREFIX):
            return None
        body: dict[str, Any] = {"reservation_id": reservation_id, "prompt_tokens": prompt_tokens,
                                "output_tokens": output_tokens, "status": status}  # fmt: skip
        for k, v in (("cached_prompt_tokens", cached_prompt_tokens), ("ttft_ms", ttft_ms), ("e2e_ms", e2e_ms)):
            if v is not None:
                body[k] = v
        try:
            code, out = self._post("/api/v1/admission/complete", body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            log.warning("admission complete not delivered (%s); the TTL will settle it", exc)
            return None
        return out if code == 200 else None

    def fleet_sample(self, sample: dict[str, Any]) -> bool:
        """Report one pool's fleet sample (`POST /api/v1/telemetry/fleet`, docs/contract.md §6) on the same
        connection and token; False when it was not delivered (the next sample supersedes it)."""
        try:
            code, _ = self._post("/api/v1/telemetry/fleet", sample)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            log.warning("fleet sample not delivered (%s)", exc)
            return False
        return code == 200
