"""Redis backend: one server-side Lua script per operation, called with EVALSHA.

The hot path (reserve, complete) talks to Redis over one connection per thread, packed by
hiredis and without the pool's per-call checkout: the store's round trip is most of a reserve,
so the client adds as little as it can to it. A restarted Redis has forgotten the scripts: on
NOSCRIPT the script is loaded and the call sent again. Short socket timeouts keep a dead store
from stalling the serving path: the caller turns `StoreUnavailable` into the class's fail mode.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import redis
from hiredis import pack_command
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError
from redis.exceptions import TimeoutError as RedisTimeoutError

from admission.backends.base import Answer, CompleteOp, ReserveOp, Scope, Settled, StoreUnavailable
from entitlements import reasons

LUA = Path(__file__).with_name("lua")
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


def _script(name: str) -> str:
    return (LUA / "lib.lua").read_text() + "\n" + (LUA / f"{name}.lua").read_text()


class _Script:
    def __init__(self, name: str) -> None:
        self.source = _script(name).encode()
        self.sha = hashlib.sha1(self.source).hexdigest().encode()  # noqa: S324  (Redis names scripts by SHA-1)


class _Local(threading.local):
    conn: Any = None
    pid = 0


class RedisBackend:
    name = "redis"

    def __init__(self, url: str, *, prefix: str = "adm:", socket_timeout: float = 0.05) -> None:
        self.prefix = prefix
        # The general client: the sweep, introspection and tests; its pool also makes the hot path's connections.
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._reserve = _Script("reserve")
        self._complete = _Script("complete")
        self._sweep = self.client.register_script(_script("sweep"))
        self._local = _Local()
        self._static: weakref.WeakKeyDictionary[Scope, tuple[int, bytes]] = weakref.WeakKeyDictionary()
        self._prefix_b = prefix.encode()
        self._scopes_key = (prefix + "scopes").encode()

    # ---- the hot path's connection ------------------------------------------------------------

    def _conn(self) -> Any:
        loc = self._local
        if loc.conn is None or loc.pid != os.getpid():  # a forked child must not share its parent's socket
            loc.conn, loc.pid = self.client.connection_pool.make_connection(), os.getpid()
        return loc.conn

    def _eval(self, script: _Script, nkeys: int, args: tuple[Any, ...], tail: tuple[int, bytes] = (0, b"")) -> Any:
        """EVALSHA with `args`, then `tail`: more arguments already packed (their count, their RESP)."""
        head = pack_command((b"EVALSHA", script.sha, nkeys, *args))
        if tail[0]:
            head = b"*%d\r\n%s%s" % (3 + len(args) + tail[0], head.split(b"\r\n", 1)[1], tail[1])
        conn = self._conn()
        try:
            try:
                conn.send_packed_command((head,), check_health=False)
                return conn.read_response()
            except NoScriptError:
                conn.send_packed_command((pack_command((b"SCRIPT", b"LOAD", script.source)),), check_health=False)
                conn.read_response()
                conn.send_packed_command((head,), check_health=False)
                return conn.read_response()
        except _DOWN as exc:
            conn.disconnect()
            raise StoreUnavailable(str(exc)) from exc

    # ---- operations -----------------------------------------------------------------------------

    def record_key(self, reservation_id: str) -> str:
        return f"{self.prefix}r:{reservation_id}"

    def _static_args(self, s: Scope) -> tuple[int, bytes]:
        """The scope's values as reserve.lua reads them (ARGV 5–22), formatted once per snapshot."""
        got = self._static.get(s)
        if got is None:
            b = s.borrow
            bor = (b.rate, b.depth) if b else (0.0, 0.0)
            d = s.retry_defaults
            middle = [s.inflight_key, s.own.key, repr(s.own.rate), repr(s.own.depth),
                      s.pool.key, repr(s.pool.rate), repr(s.pool.depth), repr(s.w_out), repr(s.w_cached), str(s.max_output)]  # fmt: skip
            borrowed = [*middle[:1], b.key, repr(b.rate), repr(b.depth), *middle[4:]] if b else middle
            vals = [
                s.traffic_class, s.max_concurrency, repr(s.own.rate), repr(s.own.depth),
                repr(s.pool.rate), repr(s.pool.depth), repr(bor[0]), repr(bor[1]), repr(s.margin),
                "1" if s.degraded else "0", repr(s.reserved_floor), _ttl(s.ttl_s), math.ceil(s.ttl_s) + s.idem_ttl_s,
                d[reasons.CONCURRENCY_LIMIT], d[reasons.RECLAIMED], d[reasons.PLATFORM_CAPACITY],
                "\t".join(middle), "\t".join(borrowed),
            ]  # fmt: skip
            # Packed as RESP once (count, blob): each call packs only its own few values in front of it.
            got = self._static[s] = (len(vals), pack_command(tuple(str(v).encode() for v in vals)).split(b"\r\n", 1)[1])
        return got

    def reserve(self, op: ReserveOp) -> Answer:
        s = op.scope
        rid = op.reservation_id
        borrow_key = s.borrow.key if s.borrow else s.own.key + ":b"
        args = (self.record_key(rid), s.own.key, s.pool.key, borrow_key, s.inflight_key, self._scopes_key,
                self._prefix_b, rid, repr(op.cost), op.meta)  # fmt: skip
        out = self._eval(self._reserve, 6, args, self._static_args(s))
        return Answer(raw=out[0].decode(), replay=out[1] == 1, expired_metas=[m.decode() for m in out[2:]])

    def complete(self, op: CompleteOp) -> Settled | None:
        args = (self.record_key(op.reservation_id), op.reservation_id, op.prompt_tokens, op.cached_prompt_tokens,
                op.output_tokens, op.status, op.idem_ttl_s, self._prefix_b)  # fmt: skip
        out = self._eval(self._complete, 1, args)
        if out is None:
            return None
        return Settled(result=json.loads(out[0]), replay=out[1] == 1, meta=out[2].decode() if len(out) > 2 else None)

    def sweep(self, limit: int = 1000) -> list[str]:
        try:
            return [_s(m) for m in self._sweep(keys=[self._scopes_key], args=[self.prefix, limit])]
        except _DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc

    # Introspection for tests and the operator pages.
    def inflight(self, inflight_key: str) -> int:
        return int(self.client.zcard(inflight_key))

    def level(self, bucket_key: str) -> float | None:
        v = self.client.hget(bucket_key, "l")
        return None if v is None else float(v)

    def ping(self) -> None:
        try:
            self.client.ping()
        except _DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc

    def clear(self) -> None:
        """Delete this backend's keys (tests, `reset`)."""
        for k in self.client.scan_iter(match=self.prefix + "*", count=1000):
            self.client.delete(k)


def _ttl(ttl_s: float) -> str:
    """Whole seconds as an integer ('600'), which reserve.lua adds to Redis' clock without formatting a float."""
    return str(int(ttl_s)) if ttl_s == int(ttl_s) else repr(ttl_s)


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v
