"""Library mode (docs/contract.md §5, issue 20): a gateway reserves in-process, without the web tier.

The same decisions as `POST /api/v1/admission/reserve` and `…/complete`, made here: the same Lua
scripts against the same Redis (admission.backends.redis), the same code around them
(admission.core), parameters from the portal's `GET /api/v1/entitlements/snapshot` (its
"admission" block, followed by ETag polling), and the same events, batched to
`POST /api/v1/telemetry/events`. No Django: everything the web tier reads from settings is an
argument here. Usage (or mount admission.asgi.AdmissionMiddleware):

    adm = Library("http://portal:8000", token="…", redis_url="redis://redis:6379/0",
                  signing_key="…")  # the portal's ADMISSION_SIGNING_KEY: its ids and ours are alike
    d = adm.reserve(request_id=rid, tenant="acme", model="llama-3.1-70b", region="us-east",
                    traffic_class="shared", prompt_tokens=812, max_output_tokens=256)
    if d["decision"] == "throttle": answer 429 with Retry-After: d["retry_after_s"]
    adm.complete(d["reservation_id"], prompt_tokens=812, output_tokens=201, status="ok")

`reserve` and `complete` take and return what admission.client.AdmissionClient does, so a gateway
switches modes by swapping one object. A reservation's record is named by a keyed hash of
(tenant, request_id); the key comes from `record_secret` (the portal derives its own from
SECRET_KEY), so a request reserved here is completed here.
"""

from __future__ import annotations

import atexit
import http.client
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

from admission import core, idcodec, settle
from admission.client import QUOTA_KEY
from admission.events import EventBuffer
from admission.serving_types import OVERFLOWS, CompleteRequest, Plan, ReserveRequest
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot, SpillSpec
from admission.usd import EMPTY, UsdBook
from capacity.input_errors import FieldError

log = logging.getLogger(__name__)

SNAPSHOT_PATH = "/api/v1/entitlements/snapshot"
EVENTS_PATH = "/api/v1/telemetry/events"
CLASSES = ("reserved", "shared", "best_effort")
STATUSES = ("ok", "cancelled", "error")
# The web tier's input ranges (admission.services): an accepted request here is one it accepts.
MAX_LEN = {"request_id": 128, "tenant": 64, "project": 64, "model": 64, "region": 64}
MAX_TOKENS = 1_000_000_000
MAX_MS = 86_400_000.0


class InvalidRequest(FieldError):
    """A reserve or complete argument out of range; `field` names it."""

    named_in_str = True


class SnapshotUnavailable(RuntimeError):
    """The portal's snapshot could not be read (at start: there is nothing to decide with)."""


# ---- the portal over HTTP (stdlib, one keep-alive connection per thread) -----------------------


class Portal:
    def __init__(self, base_url: str, token: str, *, timeout_s: float = 5.0) -> None:
        u = urlsplit(base_url)
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname or "127.0.0.1", u.port or (443 if u.scheme == "https" else 80)
        self._base = u.path.rstrip("/")
        self._auth = f"Token {token}"
        self.timeout_s = timeout_s
        self._local = threading.local()

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[
        int, dict[str, str], bytes
    ]:  # fmt: skip
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        h = {"Authorization": self._auth, **(headers or {})}
        if data is not None:
            h["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
                conn = self._local.conn = cls(self._host, self._port, timeout=self.timeout_s)
            try:
                conn.request(method, self._base + path, body=data, headers=h)
                r = conn.getresponse()
                raw = r.read()
                if (r.getheader("Connection") or "").lower() == "close":
                    self.close()
                return r.status, {k.lower(): v for k, v in r.getheaders()}, raw
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.close()  # a kept-alive connection the server closed: one fresh try
                if attempt == 2:
                    raise
            except Exception:
                self.close()
                raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None


# ---- the snapshot: the portal's "admission" block, followed by ETag --------------------------


@dataclass(frozen=True)
class View:
    """One snapshot with the settings its plans are built with (both from the same portal answer)."""

    snap: Snapshot
    depth_s: float
    ttl_s: float
    idem_ttl_s: int
    etag: str

    def plan_for(
        self, snap: Snapshot, sp: ScopeParams, pool: PoolParams, prefix: str, who: tuple[str, str, str, str]
    ) -> Plan:
        key = (prefix, sp.key)
        got = snap.plans.get(key)
        if got is None:
            got = snap.plans[key] = core.build_plan(
                sp, pool, prefix, who, depth_s=self.depth_s, ttl_s=self.ttl_s, idem_ttl_s=self.idem_ttl_s,
                target=core.spill_target(snap, sp),
            )  # fmt: skip
        return got


def _limits(d: dict[str, Any] | None) -> Any:
    if not d:
        return None
    from admission.budgets import LimitSpec  # only scopes with budgets or a request rate carry one

    return LimitSpec(**d)


def view_from(block: dict[str, Any], version: int, etag: str) -> View:
    """A View from the snapshot's "admission" block (admission.snapshot_export writes it)."""
    if not isinstance(block, dict) or block.get("format") != 1:
        raise SnapshotUnavailable("the portal's snapshot has no admission block of format 1 (portal too old?)")
    pools = {
        int(p["id"]): PoolParams(
            pool_id=int(p["id"]),
            slug=p["slug"],
            rate=p["rate"],
            depth=p["depth"],
            margin=p["margin"],
            degraded=p["degraded"],
            reserved_floor=p["reserved_floor"],
            health=None,
            lend_rate=p.get("lend_rate"),
        )  # fmt: skip
        for p in block["pools"]
    }
    scopes: dict[tuple[str, str, str, str, str], ScopeParams] = {}
    for s in block["scopes"]:
        fields = {k: v for k, v in s.items() if k != "scope"}
        if "limits" in fields:
            fields["limits"] = _limits(fields["limits"])
        if fields.get("spillover"):
            fields["spillover"] = SpillSpec(**fields["spillover"])
        scopes[tuple(s["scope"])] = ScopeParams(**fields)
    u = block.get("usd") or {}
    book = UsdBook({(t, p): float(v) for t, p, v in u.get("limits", [])}, {int(k): float(v) for k, v in
                   u.get("per_wt", {}).items()}) if u.get("limits") else EMPTY  # fmt: skip
    snap = Snapshot(scopes, pools, frozenset((m, r) for m, r in block["placements"]), float("inf"), version, usd=book)
    return View(snap, float(block["bucket_depth_s"]), float(block["ttl_s"]), int(block["idem_ttl_s"]), etag)


class SnapshotFollower:
    """Reads the snapshot once now, then every `poll_s` with If-None-Match (304: nothing moved) in a
    daemon thread. A failed poll keeps the snapshot held (the portal may be restarting)."""

    def __init__(self, portal: Portal, *, poll_s: float = 1.0) -> None:
        self.portal, self.poll_s = portal, poll_s
        self.version = 0
        self.counts = {"polls": 0, "not_modified": 0, "updates": 0, "failures": 0}
        self.view = self._fetch(None)
        if self.view is None:
            raise AssertionError("a first read cannot be 'not modified'")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="admission-snapshot", daemon=True)
        self._thread.start()

    def _fetch(self, etag: str | None) -> View | None:
        headers = {"If-None-Match": etag} if etag else {}
        try:
            status, h, raw = self.portal.request("GET", SNAPSHOT_PATH, headers=headers)
        except (OSError, http.client.HTTPException) as exc:
            raise SnapshotUnavailable(f"GET {SNAPSHOT_PATH}: {exc}") from exc
        self.counts["polls"] += 1
        if status == 304:
            self.counts["not_modified"] += 1
            return None
        if status != 200:
            raise SnapshotUnavailable(f"GET {SNAPSHOT_PATH} answered {status}: {raw[:200]!r}")
        body = json.loads(raw)
        self.version += 1
        self.counts["updates"] += 1
        return view_from(body.get("admission"), self.version, h.get("etag", ""))

    def poll(self) -> bool:
        """One poll now; True when the snapshot changed."""
        got = self._fetch(self.view.etag)  # type: ignore[union-attr]  # set by start()
        if got is None:
            return False
        self.view = got
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception as exc:  # the portal is away or answered nonsense: keep what we hold
                self.counts["failures"] += 1
                log.warning("admission library: snapshot poll failed (%s); serving version %s", exc, self.version)

    def stop(self) -> None:
        self._stop.set()


# ---- events: batched to the portal ------------------------------------------------------------


class EventsSink:
    """POST a batch to `/api/v1/telemetry/events`. A 200, or a 400 whose every event was bad (they
    would be refused again), is an answer; anything else raises, so the buffer keeps the batch
    and retries it with backoff (the portal deduplicates by event id: a resent batch is harmless)."""

    def __init__(self, portal: Portal, source: str) -> None:
        self.portal, self.source = portal, source

    def __call__(self, batch: list[dict[str, Any]]) -> Any:
        status, _, raw = self.portal.request("POST", EVENTS_PATH, {"source": self.source, "events": batch})
        if status == 200 or (status == 400 and b'"errors"' in raw):
            return json.loads(raw)
        raise RuntimeError(f"POST {EVENTS_PATH} answered {status}: {raw[:200]!r}")


def log_dead_letter(batch: list[dict[str, Any]], error: str) -> None:
    """No database here: a batch the portal kept refusing is logged whole, so it can be replayed."""
    log.error("admission library: %d events not delivered (%s): %s", len(batch), error, json.dumps(batch))


# ---- the library ------------------------------------------------------------------------------


def _str(name: str, v: Any, *, required: bool = True) -> str:
    # A reserve's five strings are nearly always plain and printable: accepted in one line, the
    # full checks below only for the rest (same answers; the profile had _str at 5 × 3 µs).
    if type(v) is str and v and len(v) <= MAX_LEN.get(name, 1024) and v.isprintable():
        return v
    if v is None or v == "":
        if required:
            raise InvalidRequest(name, "this field is required")
        return ""
    limit = MAX_LEN.get(name, 1024)
    if not isinstance(v, str) or len(v) > limit:
        raise InvalidRequest(name, f"must be a string of at most {limit} characters")
    # isprintable() is False for every control character: the scan runs only for the rare string
    # that is not (12 -> 0.5 us for a reserve's five strings).
    if not v.isprintable() and any(c < " " or "\x7f" <= c <= "\x9f" for c in v):
        raise InvalidRequest(name, "must not contain control characters")
    return v


def _int(name: str, v: Any, *, required: bool = True) -> int | None:
    if type(v) is int and 0 <= v <= MAX_TOKENS:  # the common case (a bool is not an int here)
        return v
    if v is None:
        if required:
            raise InvalidRequest(name, "this field is required")
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > MAX_TOKENS:
        raise InvalidRequest(name, f"must be a whole number from 0 to {MAX_TOKENS:,}")
    return v


def _ms(name: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= MAX_MS:
        raise InvalidRequest(name, f"must be a number from 0 to {MAX_MS:,.0f}")
    return float(v)


class Library:
    def __init__(
        self, portal_url: str, token: str, *, signing_key: str, redis_url: str | None = None, backend: Any = None,
        previous_signing_keys: Iterable[str] = (), record_secret: str | None = None, prefix: str = "adm:",
        redis_cluster: bool = False, redis_timeout_s: float = 0.3, poll_s: float = 1.0,
        source: str = "admission-library", event_batch: int = 500, event_flush_s: float = 1.0,
        event_bound: int = 100_000, sweep_every_s: float | None = 30.0, http_timeout_s: float = 5.0,
        dead_letter: Callable[[list[dict[str, Any]], str], Any] = log_dead_letter, quota_headers: bool = True,
    ) -> None:  # fmt: skip
        """`quota_headers`: each reserve answer carries the remaining quota (QUOTA_KEY), read by the
        same script call (bench/quota_headers.py measures it)."""
        self.quota_headers = quota_headers
        if not signing_key:
            raise InvalidRequest("signing_key", "required: the key reservation ids are signed with")
        self.portal = Portal(portal_url, token, timeout_s=http_timeout_s)
        if backend is None:
            if not redis_url:
                raise InvalidRequest("redis_url", "required unless a backend is given")
            from admission.backends.redis import RedisBackend

            backend = RedisBackend(
                redis_url, prefix=prefix, socket_timeout=redis_timeout_s, cluster=redis_cluster or None
            )
        self.backend = backend
        self._keys = [signing_key.encode(), *(k.encode() for k in previous_signing_keys if k)]
        self._rid_key = idcodec.derive_record_key(record_secret or signing_key)
        self.snapshot = SnapshotFollower(self.portal, poll_s=poll_s)
        self.events = EventBuffer(EventsSink(Portal(portal_url, token, timeout_s=http_timeout_s), source),
                                  batch=event_batch, flush_s=event_flush_s, bound=event_bound,
                                  dead_letter=dead_letter)  # fmt: skip
        self._emit = self.events.emit
        self._stop = threading.Event()
        if sweep_every_s:
            threading.Thread(
                target=self._sweeper, args=(sweep_every_s,), name="admission-lib-sweep", daemon=True
            ).start()
        atexit.register(self.close)

    def _sign(self, c: idcodec.Claims) -> str:
        return idcodec.sign(c, self._keys[0])

    def reserve(
        self, *, request_id: str, tenant: str, model: str, region: str, traffic_class: str, prompt_tokens: int,
        cached_prompt_tokens: int | None = None, max_output_tokens: int | None = None, project: str | None = None,
        overflow: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        """The admit or throttle body, as the HTTP API answers it. Bad input raises InvalidRequest."""
        if traffic_class not in CLASSES:
            raise InvalidRequest("traffic_class", f"must be one of {', '.join(CLASSES)}")
        prompt = _int("prompt_tokens", prompt_tokens) or 0
        cached = _int("cached_prompt_tokens", cached_prompt_tokens, required=False) or 0
        if cached > prompt:
            raise InvalidRequest("cached_prompt_tokens", "cannot exceed prompt_tokens")
        if overflow is not None and overflow not in OVERFLOWS:
            raise InvalidRequest("overflow", f"must be one of {', '.join(OVERFLOWS)}")
        req = ReserveRequest(
            request_id=_str("request_id", request_id), tenant=_str("tenant", tenant),
            project=_str("project", project, required=False), model=_str("model", model),
            region=_str("region", region), traffic_class=traffic_class, prompt_tokens=prompt,
            cached_prompt_tokens=cached, max_output_tokens=_int("max_output_tokens", max_output_tokens, required=False),
            overflow=overflow,
        )  # fmt: skip
        view = cast(View, self.snapshot.view)  # a View once started (start() loads the first)
        d = core.reserve(req, view.snap, self.backend, sign=self._sign, rid_key=self._rid_key,
                         plan_for=view.plan_for, emit=self._emit, quota=self.quota_headers)  # fmt: skip
        # The remaining quota as the HTTP API sends it in headers (AdmissionClient answers alike).
        return {**d.body, QUOTA_KEY: d.headers} if d.headers else d.body

    def complete(
        self, reservation_id: str, *, prompt_tokens: int, output_tokens: int, status: str = "ok",
        cached_prompt_tokens: int | None = None, ttft_ms: float | None = None, e2e_ms: float | None = None,
    ) -> dict[str, Any] | None:  # fmt: skip
        """The settlement (as the HTTP API's 200 body); None when it could not be settled (an id
        not signed with our keys, a reservation the store no longer knows, the store down)."""
        code, body = self.complete_answer(reservation_id, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                                          status=status, cached_prompt_tokens=cached_prompt_tokens, ttft_ms=ttft_ms,
                                          e2e_ms=e2e_ms)  # fmt: skip
        return body if code == 200 else None

    def complete_answer(
        self, reservation_id: str, *, prompt_tokens: int, output_tokens: int, status: str = "ok",
        cached_prompt_tokens: int | None = None, ttft_ms: float | None = None, e2e_ms: float | None = None,
    ) -> tuple[int, dict[str, Any]]:  # fmt: skip
        """(HTTP status, body) exactly as `POST /api/v1/admission/complete` would answer."""
        if status not in STATUSES:
            raise InvalidRequest("status", f"must be one of {', '.join(STATUSES)}")
        prompt = _int("prompt_tokens", prompt_tokens) or 0
        cached = _int("cached_prompt_tokens", cached_prompt_tokens, required=False) or 0
        if cached > prompt:
            raise InvalidRequest("cached_prompt_tokens", "cannot exceed prompt_tokens")
        req = CompleteRequest(
            reservation_id=_str("reservation_id", reservation_id), prompt_tokens=prompt, cached_prompt_tokens=cached,
            output_tokens=_int("output_tokens", output_tokens) or 0, status=status, ttft_ms=_ms("ttft_ms", ttft_ms),
            e2e_ms=_ms("e2e_ms", e2e_ms),
        )  # fmt: skip
        view = cast(View, self.snapshot.view)  # a View once started (start() loads the first)
        return settle.complete(req, idcodec.verify(reservation_id, self._keys), view.snap, self.backend,
                             rid_key=self._rid_key, plan_for=view.plan_for, emit=self._emit,
                             idem_ttl_s=view.idem_ttl_s)  # fmt: skip

    def sweep(self) -> int:
        """Settle this store's reservations past their TTL (also every `sweep_every_s` in a thread)."""
        return settle.sweep(self.backend, self._emit)

    def _sweeper(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.sweep()
            except Exception:
                log.warning("admission library: sweep failed; trying again next round", exc_info=True)

    def flush(self) -> int:
        """Send the buffered events now (tests, shutdown). → events delivered."""
        return self.events.flush()

    def close(self) -> None:
        """Stop polling and sweeping; deliver what is buffered (bounded, then dead-lettered)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self.snapshot.stop()
        self.events.shutdown(10.0)
        atexit.unregister(self.close)
