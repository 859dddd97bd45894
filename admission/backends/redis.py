"""Redis backend: one server-side Lua script per operation, called with EVALSHA.

redis-py's `register_script` sends EVALSHA and loads the script on NOSCRIPT (a restarted
Redis has forgotten it). Short socket timeouts keep a dead store from stalling the serving
path: the caller turns `StoreUnavailable` into the class's fail mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from admission.backends.base import Answer, CompleteOp, ReserveOp, Settled, StoreUnavailable
from entitlements import reasons

LUA = Path(__file__).with_name("lua")
_DOWN = (RedisConnectionError, RedisTimeoutError, OSError)


def _script(name: str) -> str:
    return (LUA / "lib.lua").read_text() + "\n" + (LUA / f"{name}.lua").read_text()


class RedisBackend:
    name = "redis"

    def __init__(self, url: str, *, prefix: str = "adm:", socket_timeout: float = 0.05) -> None:
        self.prefix = prefix
        self.client = redis.Redis.from_url(
            url,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry_on_timeout=False,
            health_check_interval=0,
        )
        self._reserve = self.client.register_script(_script("reserve"))
        self._complete = self.client.register_script(_script("complete"))
        self._sweep = self.client.register_script(_script("sweep"))

    @property
    def exp_key(self) -> str:
        return self.prefix + "exp"

    def res_key(self, reservation_id: str) -> str:
        return f"{self.prefix}res:{reservation_id}"

    def reserve(self, op: ReserveOp) -> Answer:
        b = op.borrow
        keys = [op.idem_key, op.own.key, op.pool.key, b.key if b else op.own.key + ":b", op.inflight_key, self.exp_key]
        d = op.retry_defaults
        args = [
            self.prefix, op.reservation_id, op.max_concurrency, op.traffic_class,
            repr(op.own.rate), repr(op.own.depth), repr(op.pool.rate), repr(op.pool.depth),
            repr(b.rate if b else 0.0), repr(b.depth if b else 0.0),
            repr(op.cost), repr(op.margin), "1" if op.degraded else "0", repr(op.reserved_floor),
            repr(op.ttl_s), op.idem_ttl_s, op.meta, repr(op.w_out), repr(op.w_cached),
            d[reasons.CONCURRENCY_LIMIT], d[reasons.RECLAIMED], d[reasons.PLATFORM_CAPACITY],
        ]  # fmt: skip
        try:
            out = self._reserve(keys=keys, args=args)
        except _DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc
        return Answer(raw=_s(out[0]), replay=bool(int(out[1])), expired_metas=[_s(m) for m in out[2:]])

    def complete(self, op: CompleteOp) -> Settled | None:
        args = [
            op.reservation_id,
            op.prompt_tokens,
            op.cached_prompt_tokens,
            op.output_tokens,
            op.status,
            op.idem_ttl_s,
            self.prefix,
        ]
        try:
            out = self._complete(keys=[self.res_key(op.reservation_id)], args=args)
        except _DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc
        if out is None:
            return None
        return Settled(
            result=json.loads(_s(out[0])), replay=bool(int(out[1])), meta=_s(out[2]) if len(out) > 2 else None
        )

    def sweep(self, limit: int = 1000) -> list[str]:
        try:
            return [_s(m) for m in self._sweep(keys=[self.exp_key], args=[self.prefix, limit])]
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


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v
