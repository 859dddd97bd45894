"""Redis backend: one server-side Lua script per operation, called with EVALSHA.

The hot path (reserve, complete) borrows a connection from a bounded set shared by the process's
threads (connections.py), packed by hiredis and without redis-py's per-call checkout: the store's
round trip is most of a reserve, so the client adds as little as it can to it. A restarted Redis
has forgotten the scripts: on NOSCRIPT the script is loaded and the call sent again. A circuit
breaker (breaker.py) decides when the store is down: a call that errs is retried (reserve and
complete are idempotent: one record per request) until the breaker opens or ATTEMPTS are spent;
only then does the caller get `StoreUnavailable` and apply the class's fail mode. Those calls are
redis_calls.py's (RedisCalls); this module holds what each operation sends: its keys and arguments.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
import weakref
from typing import Any

import redis
from hiredis import pack_command

from admission import keys
from admission.backends import fair, inputs, usd_redis
from admission.backends.base import (
    Answer,
    Bucket,
    CompleteOp,
    EpochChanged,
    Lost,
    Period,
    ReserveOp,
    Scope,
    Settled,
    SpillOp,
    StoreUnavailable,
    lost_charges,
    new_epoch,
    periods_at,
)
from admission.backends.redis_calls import DEFAULT_TIMEOUT_S, DOWN, POOL_SIZE, RedisCalls, Script
from admission.usd import UsdAnswer, UsdHold


class RedisBackend(RedisCalls):
    name = "redis"

    def __init__(
        self, url: str, *, prefix: str = "adm:", socket_timeout: float = DEFAULT_TIMEOUT_S, pool_size: int = POOL_SIZE,
        breaker_threshold: int = 5, probe_every_s: float = 0.5, cluster: bool | None = None,
    ) -> None:  # fmt: skip
        """`cluster`: a Redis Cluster (redis_calls.RedisCalls); `prefix`: every key's, unless a pool's tag."""
        super().__init__(url, socket_timeout=socket_timeout, pool_size=pool_size, breaker_threshold=breaker_threshold,
                         probe_every_s=probe_every_s, cluster=cluster)  # fmt: skip
        self.prefix = prefix
        self._reserve = Script("reserve")
        self._complete = Script("complete")
        self._expire = Script("expire")
        self._spill = Script("spill")
        self._usd = Script("usd")
        self._static: weakref.WeakKeyDictionary[Scope, tuple[int, bytes]] = weakref.WeakKeyDictionary()
        self._prefix_b = prefix.encode()
        self.epoch_key = keys.token_epoch(prefix)
        self._epoch_arg = b"e:" + self.epoch_key.encode() + b"\t"
        self._registry = keys.pools_registry(prefix)
        self._registered: dict[str, float] = {}  # pool tag → when to list it again (time.monotonic())
        self._register_lock = threading.Lock()
        self.period_offset_s = 0.0  # tests only: see period_now

    # ---- operations -----------------------------------------------------------------------------

    # ---- the token-revocation epoch (docs/serving-path-faults.md) ---------------------------------

    def _epoch_check(self, want: str | None) -> bytes:
        """The scripts' epoch argument: they compare it with the store's epoch in the same call, so
        the web tier's token check costs no round trip of its own. On Redis Cluster the epoch's key
        is in a slot of its own, which a script may not read: one GET first, through the breaker."""
        if want is None:
            return b""
        if not self.cluster:
            return self._epoch_arg + want.encode()
        if self.breaker.allow():
            try:
                cur = self.client.get(self.epoch_key)
            except (*DOWN, redis.RedisError):
                self.breaker.failure()
                return b""  # the store decides next: its own call fails the same way, into the fail mode
            self.breaker.success()
            if cur is None:
                self.bump_epoch()
                cur = self.client.get(self.epoch_key)
            if cur is not None and _s(cur) != want:
                raise EpochChanged(_s(cur))
        return b""

    def bump_epoch(self) -> None:
        """A new epoch: every process's verified tokens are checked again on their next use."""
        try:
            self.client.set(self.epoch_key, new_epoch())
        except (*DOWN, redis.RedisError) as exc:
            raise StoreUnavailable(str(exc)) from exc

    def current_epoch(self) -> str | None:
        try:
            got = self.client.get(self.epoch_key)
        except (*DOWN, redis.RedisError) as exc:
            raise StoreUnavailable(str(exc)) from exc
        return None if got is None else _s(got)

    def record_key(self, reservation_id: str, tag: str = "") -> str:
        """`tag`: the pool's key prefix (Scope.tag, Where.tag); "" for scopes built without one (tests)."""
        return keys.record(tag or self.prefix, reservation_id)

    def _static_args(self, s: Scope) -> tuple[int, bytes]:
        """The scope's values in the inputs table's order (inputs.STATIC), packed once per snapshot."""
        got = self._static.get(s)
        if got is None:
            vals = inputs.static_wire(s)
            # Packed as RESP once (count, blob): each call packs only its own few values in front of it.
            packed = pack_command(tuple(v.encode() for v in vals))  # type: ignore[arg-type]  # stub: 1-tuple
            got = self._static[s] = (len(vals), packed.split(b"\r\n", 1)[1])
        return got

    def _register(self, tag: str) -> None:
        """List the pool's tag for the sweep, outside the scripts (the registry is in a slot of its
        own): by one thread, after a reserve went through, again a minute later (a store that lost
        its data lists it again)."""
        now = time.monotonic()
        if now < self._registered.get(tag, 0.0):
            return
        with self._register_lock:
            if now < self._registered.get(tag, 0.0):
                return
            self._registered[tag] = now + 60.0
        try:
            self.client.sadd(self._registry, tag)
        except (*DOWN, redis.RedisError):
            self._registered.pop(tag, None)  # the store is away: the next reserve tries again

    def reserve(self, op: ReserveOp) -> Answer:
        s = op.scope
        rid = op.reservation_id
        borrow_key = s.borrow.key if s.borrow else s.own.key + ":b"
        ifs = keys.inflight_sets(s.tag or self.prefix)
        ks: tuple[str, ...] = (self.record_key(rid, s.tag), s.own.key, s.pool.key, borrow_key, s.inflight_key, ifs)
        # KEYS 7-8: the pool's lend bucket and fair-share table (never touched without a share or lends)
        ln, sh = _lend_of(s), s.share
        ks += (ln.key if ln else s.own.key + ":ln", sh.fair if sh else s.own.key + ":fs")
        extra: tuple[Any, ...] = ()
        if s.limits is not None:
            more_keys, extra = self._limit_args(s, op.units)
            ks += more_keys
        if s.lends is not None and s.lends.keep is not None:
            ks += (s.lends.keep.key,)  # the keep-back bucket: reserve.lua's last key
        # reserve.lua's last ARGV: the remaining quota wanted, then whether a spill may follow (issue 36.1)
        extra += ((b"1" if op.quota else b"0") + (b"1" if op.overflow else b""),)
        args = (*ks, self._epoch_check(op.epoch), rid, repr(op.cost), op.meta)
        out, attempts = self._eval(self._reserve, len(ks), args, self._static_args(s), extra)
        if out[0] == b"E":
            raise EpochChanged(_s(out[1]))
        if s.tag:
            self._register(s.tag)
        metas = self._expire_due(s, ifs, [_s(i) for i in out[4:]]) if len(out) > 4 else []
        return Answer(raw=out[0].decode(), replay=out[1] >= 1, expired_metas=metas, retried=attempts > 1,
                      settled=out[1] == 2, in_flight=out[2], quota=out[3].decode() or None)  # fmt: skip

    def spill(self, op: SpillOp) -> Answer:
        """The second call of a spilled reserve (spill.lua), on the TARGET pool's hash tag: every key it
        touches is under that tag, so on a Redis Cluster it runs on the target's node in one slot."""
        sp = op.spill
        ln = sp.lend
        ks = (self.record_key(op.reservation_id, sp.tag), sp.bucket.key, sp.pool.key, sp.inflight_key,
              keys.inflight_sets(sp.tag or self.prefix), ln.key if ln else sp.bucket.key + ":ln")  # fmt: skip
        middle = "\t".join((sp.inflight_key, sp.bucket.key, repr(sp.bucket.rate), repr(sp.bucket.depth), sp.pool.key,
                            repr(sp.pool.rate), repr(sp.pool.depth), repr(op.w_out), repr(op.w_cached),
                            str(op.max_output)))  # fmt: skip
        args = (*ks, op.reservation_id, repr(op.cost), op.meta, op.fallback, repr(sp.bucket.rate),
                repr(sp.bucket.depth), repr(sp.pool.rate), repr(sp.pool.depth), repr(sp.margin),
                "1" if sp.degraded else "0", repr(ln.rate) if ln else "0", repr(ln.depth) if ln else "0",
                _ttl(op.ttl_s), math.ceil(op.ttl_s) + op.idem_ttl_s, middle)  # fmt: skip
        out, attempts = self._eval(self._spill, len(ks), args)
        if sp.tag:
            self._register(sp.tag)
        return Answer(raw=_s(out[0]), replay=out[1] >= 1, expired_metas=[], retried=attempts > 1,
                      settled=out[1] == 2, in_flight=out[2])  # fmt: skip

    def _expire_due(self, s: Scope, ifs: str, ids: list[str]) -> list[str]:
        """Settle the reservations a reserve found past their TTL (expire.lua: their records are
        keys of their own). Not done now (the store went away meanwhile): the pool's sweep will."""
        ks = (s.inflight_key, ifs, *(self.record_key(i, s.tag) for i in ids))
        try:
            out, _ = self._eval(self._expire, len(ks), (*ks, *ids))
        except StoreUnavailable:
            return []
        return [_s(m) for m in out]

    def usd_hold(self, h: UsdHold) -> UsdAnswer:
        return usd_redis.hold(self, self._usd, h)

    def usd_settle(self, keys: tuple[str, ...], rid: str, usd: float | None) -> bool:
        return usd_redis.settle(self, self._usd, keys, rid, usd)

    def usd_spent(self, key: str) -> tuple[float, float] | None:
        return usd_redis.spent(self, key)

    def period_now(self) -> float:
        """The time the periods' candidates are computed around (reserve.lua picks among them by
        Redis' clock). `period_offset_s` shifts it for tests that cross a boundary on demand: the
        keys are named for the shifted periods and the boundaries sent unshifted, so Redis' own
        clock still decides when the period changes."""
        return time.time() + self.period_offset_s

    def _limit_args(self, s: Scope, units: float) -> tuple[tuple[str, ...], tuple[Any, ...]]:
        """reserve.lua's KEYS 9+ and ARGV 29+ for a scope with budgets or a request rate."""
        lim = s.limits
        assert lim is not None
        rq = lim.rps
        keys = [rq.key if rq else s.own.key + ":rq"]
        vals: list[Any] = [lim.unit, repr(units), repr(rq.rate) if rq else "0", repr(rq.depth) if rq else "0",
                           len(lim.periods)]  # fmt: skip
        t, off = self.period_now(), self.period_offset_s
        for per in lim.periods:
            ps = periods_at(per.kind, lim.tz, t)
            keys += [f"{per.key}:{pid}" for pid, _, _ in ps]
            vals += [repr(per.limit), repr(ps[1][1] - off), repr(ps[1][2] - off), repr(ps[2][2] - off)]
        return tuple(keys), tuple(vals)

    def seed_period_usage(self, period: Period, tz: str, used: float) -> str:
        """Set (never add) what the current `period` bucket has spent: usage carried from another
        gateway (import_atlas), so a second import changes nothing. The period's field in the scope's
        hash (issue 49.1; its own key where the name has no scope hash). → the bucket's key."""
        pid, _, end = periods_at(period.kind, tz, self.period_now())[1]
        key = f"{period.key}:{pid}"
        self._period_write(key, float(used), end, add=False)
        return key

    def add_period_usage(self, period_key: str, delta: float, end: float) -> None:
        """Add usage carried from another gateway to a period bucket (import_atlas): traffic counted
        meanwhile is kept."""
        self._period_write(period_key, float(delta), end, add=True)

    def _period_write(self, key: str, v: float, end: float, *, add: bool) -> None:
        """One script: a spend still under the period's own key (a store written before issue 49.1) moves
        into the scope's hash first; then the field is set or added to."""
        home = keys.scope_hash_of(key, self.prefix)
        try:
            if home is None:  # not a scope's name: the key itself, kept a day past the boundary
                exat = math.ceil(end - self.period_offset_s) + 86400
                pipe = self.client.pipeline(transaction=True)
                (pipe.incrbyfloat(key, v) if add else pipe.set(key, repr(v)))
                pipe.expireat(key, exat)
                pipe.execute()
                return
            self.client.eval(_PERIOD_WRITE, 2, home, key, repr(v), "1" if add else "0")
        except DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc

    def used(self, period_key: str) -> float | None:
        """What a period bucket ('<stem>:<period id>') has spent, None when untouched: its field in the
        scope's hash, or its own key in a store written before issue 49.1."""
        home = keys.scope_hash_of(period_key, self.prefix)
        v = self.client.hget(home, period_key) if home is not None else None
        if v is None:
            v = self.client.get(period_key)
        return None if v is None else float(v)

    def complete(self, op: CompleteOp) -> Settled | None:
        w = op.where
        rk = self.record_key(op.reservation_id, w.tag if w else "")
        # Every key the script may touch is in KEYS (Redis Cluster). Without `where` (an op built by
        # hand) the record's own keys come back in the first answer (reply 4) and are sent again.
        ik, charged, pool = (w.inflight or rk, w.charged or rk, w.pool or rk) if w is not None else (rk, rk, rk)
        if op.lost is not None:
            charged, pool = op.lost.charged.key, op.lost.pool.key
        periods = self._period_keys(w) if w is not None and w.limits is not None else ()
        # The scope's hash, where the periods' spend lives (issue 49.1): a key too (Redis Cluster).
        home = (keys.scope_hash_of(w.inflight, self.prefix) or "") if periods and w is not None and w.inflight else ""
        periods += (home,) if home else ()
        lending = w.lending if w is not None else ()  # issue 36.3: the lend accounts the record may name
        tail = (op.reservation_id, op.prompt_tokens, op.cached_prompt_tokens, op.output_tokens, op.status,
                op.idem_ttl_s, self._epoch_check(op.epoch), _lost_arg(op.lost, self.period_offset_s), home)  # fmt: skip
        for _ in range(2):
            ks = (rk, ik, charged, pool, *periods, *lending)
            out, attempts = self._eval(self._complete, len(ks), (*ks, *tail))
            if out is not None and out[0] == b"E":
                raise EpochChanged(_s(out[1]))
            if out is None or out[1] != 4:
                break
            ik, charged, pool = (_s(k) for k in out[2:5])
            periods, lending = tuple(_s(k) for k in out[5:]), ()
        if out is None:
            return None
        if out[1] == 3:
            return Settled(result=json.loads(out[0]), replay=False, meta=None, retried=attempts > 1, lost=True)
        meta = out[2].decode() if len(out) > 2 else None
        return Settled(result=json.loads(out[0]), replay=out[1] == 1, meta=meta, retried=attempts > 1)

    def _period_keys(self, w: Any) -> tuple[str, ...]:
        """The scope's period budget keys around now (complete.lua refunds among those the record names)."""
        lim, t = w.limits, self.period_now()
        return tuple(f"{per.key}:{pid}" for per in lim.periods for pid, _, _ in periods_at(per.kind, lim.tz, t))

    def sweep(self, limit: int = 1000) -> list[str]:
        """Settle reservations past their TTL at their estimate, pool by pool (each pool's keys sit in
        one slot): every in-flight zset a pool lists, its due ids to expire.lua."""
        out: list[str] = []
        try:
            tags = sorted(_s(t) for t in self.client.smembers(self._registry)) + [self.prefix]
            now = time.time()
            for t in tags:
                ifs = keys.inflight_sets(t)
                for ik in sorted(_s(k) for k in self.client.smembers(ifs)):
                    left = limit - len(out)
                    if left <= 0:
                        return out
                    # Scores in microseconds; below US_MIN in seconds (written before: lib.lua).
                    got_ids = self.client.zrangebyscore(ik, "-inf", now, start=0, num=left)
                    if len(got_ids) < left:
                        got_ids += self.client.zrangebyscore(
                            ik, US_MIN, int(now * 1e6), start=0, num=left - len(got_ids)
                        )
                    ids = [_s(i) for i in got_ids]
                    if not ids:
                        continue  # nothing due (a listed zset stays listed when empty: expire.lua)
                    ks = (ik, ifs, *(keys.record(t, i) for i in ids))
                    got, _ = self._eval(self._expire, len(ks), (*ks, *ids))
                    out += [_s(m) for m in got]
        except DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc
        return out

    def relist_inflight(self) -> int:
        """List every non-empty in-flight zset in its pool's set, which the sweep walks (→ how many were
        not listed). reserve.lua lists a scope's zset with its first admission and expire.lua no longer
        unlists an empty one (issue 49.1); an old process still running during a rolling deploy may have
        unlisted one that the new code then refilled. `manage.py admission_relist_inflight` runs this once
        after such a deploy (docs/operations.md): a SCAN of the store, not for the serving path."""
        n = 0
        try:
            for raw in self.client.scan_iter(match=self.prefix + "*if:*", count=1000, _type="zset"):
                k = _s(raw)
                cut = k.find("}:") + 2 if "}:" in k else len(self.prefix)
                if k[cut:].startswith("if:") and self.client.zcard(k):
                    n += int(self.client.sadd(keys.inflight_sets(k[:cut]), k))
        except DOWN as exc:
            raise StoreUnavailable(str(exc)) from exc
        return n

    # Introspection for tests and the operator pages.
    def inflight(self, inflight_key: str) -> int:
        return int(self.client.zcard(inflight_key))

    def fair_state(self, fair_key: str, window_s: float) -> dict[str, tuple[float, float, bool]]:
        """A pool's fair-share table now (issue 36.3): member → (borrowed wt in the window, weight,
        active: fair.active), decayed to Redis' clock."""
        sec, us = self.client.time()
        now = sec + us / 1e6
        out: dict[str, tuple[float, float, bool]] = {}
        for m, raw in self.client.hgetall(fair_key).items():
            f = [float(x) for x in _s(raw).split("|")]
            out[_s(m)] = (fair.decayed(f[0], f[1], now, window_s), f[2], fair.active(f, now))
        return out

    def level(self, bucket_key: str) -> float | None:
        got = self.bucket_state(bucket_key)
        return None if got is None else got[0]

    def bucket_state(self, bucket_key: str) -> tuple[float, float] | None:
        """(level, when it was written, by Redis' clock) as stored; None when untouched (full). A
        request-rate bucket is a field of its scope's hash (reserve.lua, issue 49.1), or its own key in
        a store written before."""
        lv, t = self.client.hmget(bucket_key, ["l", "t"])
        if lv is None and (home := keys.scope_hash_of(bucket_key, self.prefix)) is not None:
            raw = self.client.hget(home, bucket_key)
            if raw is not None:
                lv, t = _s(raw).split("|")
        return None if lv is None else (float(lv), float(t))

    def ping(self) -> None:
        """A health probe: its answer also opens or closes the breaker."""
        if not self.breaker.probe():
            raise StoreUnavailable("admission store did not answer PING")

    def clear(self) -> None:
        """Delete this backend's keys (tests, `reset`)."""
        for k in self.client.scan_iter(match=self.prefix + "*", count=1000):
            self.client.delete(k)


US_MIN = 10**12  # lib.lua: an in-flight zset's scores from here on are microseconds, below it seconds

# KEYS: the scope's hash, the period's key (its field's name, and its own key before issue 49.1).
_PERIOD_WRITE = """
local old = redis.call('GET', KEYS[2])
if old then
  if not redis.call('HGET', KEYS[1], KEYS[2]) then redis.call('HSET', KEYS[1], KEYS[2], old) end
  redis.call('DEL', KEYS[2])
end
if ARGV[2] == '1' then return redis.call('HINCRBYFLOAT', KEYS[1], KEYS[2], ARGV[1]) end
return redis.call('HSET', KEYS[1], KEYS[2], ARGV[1])
"""


def _lost_arg(lost: Lost | None, offset: float = 0.0) -> str:
    """complete.lua's ARGV 8: what a signed id says, for a store that forgot the reservation; with
    budgets a 13th field 'unit|key|limit|end…' (the periods it was made in; `offset`: period_offset_s)."""
    if lost is None:
        return ""
    c, p = lost.charged, lost.pool
    vals = (c.key, c.rate, c.depth, p.key, p.rate, p.depth, lost.w_out, lost.w_cached, lost.max_output,
            lost.estimate, lost.expires, lost.answer)  # fmt: skip
    out = "\t".join(v if isinstance(v, str) else repr(v) for v in vals)
    if lost.limits is not None and lost.limits.periods:
        at = (lost.reserved_at or time.time()) + offset
        charges = lost_charges(dataclasses.replace(lost, reserved_at=at), at)
        out += "\t" + "|".join([lost.limits.unit, *(f"{k}|{lim!r}|{end - offset!r}" for k, lim, end in charges)])
    return out


def _lend_of(s: Scope) -> Bucket | None:
    """The pool's lend bucket as the scope meets it: a borrower's (Share) or its own admissions' (Lends),
    one bucket, reserve.lua's KEYS 7 / ARGV 23-24."""
    if s.share is not None and s.share.lend is not None:
        return s.share.lend
    return s.lends.lend if s.lends is not None else None


def _ttl(ttl_s: float) -> str:
    """Whole seconds as an integer ('600'), which reserve.lua adds to Redis' clock without formatting a float."""
    return str(int(ttl_s)) if ttl_s == int(ttl_s) else repr(ttl_s)


def _s(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v
