"""A small client for gateways: reserve before a model call, complete after it.

Standard library only (http.client, one keep-alive connection per thread). When the portal
cannot be reached (a timeout, a refused or dropped connection) or answers 5xx, the client applies
the same fail mode as the portal does when its store is down (`fail_mode`): `reserved` and `shared`
are admitted locally (source "fail_open"), `best_effort` is refused with ADMISSION_UNAVAILABLE.
Anything else is not an outage and lifts no limit: a 401/403 (this gateway's token is revoked or
mistyped) refuses every request with GATEWAY_TOKEN_REFUSED, calls `on_event` and logs at most once a
minute; another unexpected answer (a wrong HEADROOM_URL: 404, a TLS or name error) refuses with
GATEWAY_MISCONFIGURED. A call's whole time, connect to last byte, is bounded by `timeout_s` (a
deadline, not a per-read timeout: an answer sent byte by byte cannot hold a request). Usage:

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
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

FAIL_OPEN_CLASSES = frozenset({"reserved", "shared"})
# The remaining quota (docs/contract.md §5) and a spilled request's pool: the portal sends them as these
# headers; a reserve's answer here carries them under QUOTA_KEY (header name → value) for the gateway to pass on to its client.
QUOTA_HEADERS = ("x-ratelimit-", "x-headroom-budget-", "x-headroom-served-from")
QUOTA_KEY = "quota_headers"
LOCAL_PREFIX = "local-fo-"
TOKEN_REFUSED = "GATEWAY_TOKEN_REFUSED"
MISCONFIGURED = "GATEWAY_MISCONFIGURED"
TOKEN_LOG_EVERY_S = 60.0
# An outage (the fail mode): no answer in time, a connection refused, reset or dropped, or a 5xx.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, ConnectionError, http.client.HTTPException)


class _Deadline:
    """A socket whose every send and receive waits only for what is left of the call's deadline."""

    deadline: float | None = None

    def _arm(self) -> None:
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("HEADROOM_TIMEOUT_S passed before the answer was whole")
            self.settimeout(left)  # type: ignore[attr-defined]

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self._arm()
        return super().recv_into(*args, **kwargs)  # type: ignore[misc]

    def recv(self, *args: Any, **kwargs: Any) -> bytes:
        self._arm()
        return super().recv(*args, **kwargs)  # type: ignore[misc]

    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self._arm()
        super().sendall(*args, **kwargs)  # type: ignore[misc]


class _DeadlineSocket(_Deadline, socket.socket):
    pass


class _DeadlineSSLSocket(_Deadline, ssl.SSLSocket):
    pass


class _DeadlineConnect:
    """connect() with what is left of the deadline, then a deadline-aware socket (plain or TLS)."""

    deadline: float | None = None
    timeout: float | None
    sock: Any

    def connect(self) -> None:
        if self.deadline is not None:
            self.timeout = max(self.deadline - time.monotonic(), 0.001)
        super().connect()  # type: ignore[misc]
        if not isinstance(self.sock, _Deadline):  # plain HTTP: the same descriptor, deadline-aware
            old = self.sock
            self.sock = _DeadlineSocket(old.family, old.type, old.proto, fileno=old.detach())
            self.sock.settimeout(self.timeout)  # a socket made from a descriptor does not keep its timeout
        self.sock.deadline = self.deadline


class _Connection(_DeadlineConnect, http.client.HTTPConnection):
    pass


class _TLSConnection(_DeadlineConnect, http.client.HTTPSConnection):
    pass


def _tls_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.sslsocket_class = _DeadlineSSLSocket
    return ctx


class AdmissionClient:
    """`on_event(event)`: called with {"event": "gateway_token_refused", "status": 401|403, "detail": …} on each
    refusal of this gateway's token (a counter or an alert of the gateway's own); the log says it once a minute."""

    def __init__(
        self, base_url: str, token: str, *, timeout_s: float = 0.25,
        on_event: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:  # fmt: skip
        u = urlsplit(base_url)
        self._https = u.scheme == "https"
        self._host = u.hostname or "127.0.0.1"
        self._port = u.port or (443 if self._https else 80)
        self._base = u.path.rstrip("/")
        self._headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.timeout_s = timeout_s
        self.on_event = on_event
        self.token_refusals = 0
        self._logged_at: dict[str, float] = {}  # what was last logged when: a refusal is logged once a minute
        self._local = threading.local()

    def _conn(self) -> _Connection | _TLSConnection:
        c: _Connection | _TLSConnection | None = getattr(self._local, "conn", None)
        if c is None:
            if self._https:
                c = _TLSConnection(self._host, self._port, timeout=self.timeout_s, context=_tls_context())
            else:
                c = _Connection(self._host, self._port, timeout=self.timeout_s)
            self._local.conn = c
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
        deadline = time.monotonic() + self.timeout_s
        for attempt in (1, 2):
            try:
                c = self._conn()
                c.deadline = deadline
                if isinstance(c.sock, _Deadline):
                    c.sock.deadline = deadline
                c.request("POST", self._base + path, body=data, headers=self._headers)
                r = c.getresponse()
                raw = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self._drop()
                quota = {k.lower(): v for k, v in r.getheaders() if k.lower().startswith(QUOTA_HEADERS)}
                try:
                    out = json.loads(raw) if raw else {}
                except ValueError:
                    if r.status < 400:
                        raise
                    out = {}  # a proxy's error page in front of the portal: the status says what happened
                return r.status, out, quota
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
        except OUTAGE_ERRORS as exc:
            log.warning("admission unreachable (%s): applying the %s fail mode", exc, traffic_class)
            return fail_mode(traffic_class)
        except (OSError, ValueError) as exc:  # a name that does not resolve, TLS refused, an answer not JSON
            return self._misconfigured(f"{type(exc).__name__}: {exc}")
        if status in (200, 429, 400):
            if quota:
                out[QUOTA_KEY] = quota  # as admission.library answers: a gateway swaps modes by one object
            return out
        if status >= 500:
            log.warning("admission answered %s: applying the %s fail mode", status, traffic_class)
            return fail_mode(traffic_class)
        if status in (401, 403):
            return self._token_refused(status, out)
        return self._misconfigured(f"HTTP {status} from {self._base}/api/v1/admission/reserve")

    def _token_refused(self, status: int, out: dict[str, Any]) -> dict[str, Any]:
        """Headroom does not accept this gateway's token: every request is refused until it does."""
        err = out.get("error") if isinstance(out, dict) else None
        detail = str((err.get("message") if isinstance(err, dict) else None) or out.get("detail") or "")
        self.token_refusals += 1
        if self.on_event is not None:
            try:
                self.on_event({"event": "gateway_token_refused", "status": status, "detail": detail})
            except Exception:  # a hook's failure never changes the answer
                log.exception("Headroom: the on_event hook failed")
        if self._log_due(TOKEN_REFUSED):
            log.error(
                "Headroom refused this gateway's token (HTTP %s%s): every request is refused until "
                "HEADROOM_GATEWAY_TOKEN names a live token of a gateway account (%d refusals so far)",
                status, f": {detail}" if detail else "", self.token_refusals,
            )  # fmt: skip
        return refusal(
            TOKEN_REFUSED,
            f"Headroom refused this gateway's token (HTTP {status}): it is revoked, mistyped or not a gateway "
            "account's. The gateway's operator must set HEADROOM_GATEWAY_TOKEN.",
        )

    def _log_due(self, what: str) -> bool:
        now = time.monotonic()
        if now - self._logged_at.get(what, -TOKEN_LOG_EVERY_S) < TOKEN_LOG_EVERY_S:
            return False
        self._logged_at[what] = now
        return True

    def _misconfigured(self, what: str) -> dict[str, Any]:
        if self._log_due(MISCONFIGURED):
            log.error("Headroom admission answered unexpectedly (%s): refusing; check HEADROOM_URL", what)
        return refusal(MISCONFIGURED, f"The gateway cannot use Headroom's admission ({what}); check HEADROOM_URL.")

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


def fail_mode(traffic_class: str) -> dict[str, Any]:
    """The answer while Headroom cannot be reached (docs/contract.md §5's store-down rule): `reserved` and
    `shared` admitted locally (nothing to complete), `best_effort` refused ADMISSION_UNAVAILABLE."""
    if traffic_class in FAIL_OPEN_CLASSES:
        return {"decision": "admit", "reservation_id": LOCAL_PREFIX + uuid.uuid4().hex, "reserved_wt": None,
                "source": "fail_open", "expires_at": None}  # fmt: skip
    return {"decision": "throttle", "reason": "ADMISSION_UNAVAILABLE", "responsible": "platform", "retry_after_s": 5}


def refusal(reason: str, message: str) -> dict[str, Any]:
    """A refusal that is not about capacity: the gateway answers `gateway_status` (503) with `message`; no
    retry time, since waiting does not fix it."""
    return {"decision": "throttle", "reason": reason, "responsible": "platform", "retry_after_s": None,
            "message": message, "gateway_status": 503}  # fmt: skip
