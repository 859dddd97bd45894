"""In-process backend: the embedded default (one process). Same semantics as the Redis scripts.

One lock serialises every operation, as Redis does for a script; `clock` is a monotonic clock
shifted to Unix time so `expires_at` reads like Redis' and tests can inject their own.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from itertools import takewhile

from admission.backends import fair, inputs
from admission.backends.base import (
    SPILLABLE,
    Answer,
    CompleteOp,
    EpochChanged,
    Period,
    ReserveOp,
    Settled,
    SpillOp,
    _wait,
    borrowed_meta,
    bounded,
    bounded_used,
    budget_units,
    decide,
    has_rps,
    lost_charges,
    new_epoch,
    periods_at,
    retry_after_s,
    settled_part,
    spent,
    spill_decide,
)
from admission.backends.memory_fair import FairLedger
from admission.backends.memory_store import _Res, _Store, _unix_monotonic
from admission.backends.quota import quota_raw
from admission.backends.usd_memory import MemoryUsd
from admission.usd import UsdAnswer, UsdHold
from capacity.bucket import refilled
from entitlements import reasons


class MemoryBackend(FairLedger):
    """The store's operations under one lock; the lending and fair-share accounts in memory_fair.py."""

    name = "memory"
    prefix = "adm:"

    def __init__(self, clock: Callable[[], float] | None = None) -> None:
        self.clock = clock or _unix_monotonic()
        self._lock = threading.Lock()
        self._s = _Store()
        self._ops = 0
        self.epoch = new_epoch()  # the revocation epoch (redis.py keeps it in the store)
        self.usd = MemoryUsd(
            lambda: self.clock()
        )  # $ accounts (issue 51.3): a lock of their own, as a script call of its own

    def period_now(self) -> float:
        return self.clock()

    def usd_hold(self, h: UsdHold) -> UsdAnswer:
        return self.usd.hold(h)

    def usd_settle(self, keys: tuple[str, ...], rid: str, usd: float | None) -> bool:
        return self.usd.settle(keys, rid, usd)

    def usd_spent(self, key: str) -> tuple[float, float] | None:
        return self.usd.spent(key)

    def bump_epoch(self) -> None:
        self.epoch = new_epoch()

    def current_epoch(self) -> str:
        return self.epoch

    def _check_epoch(self, want: str | None) -> None:
        if want is not None and want != self.epoch:
            raise EpochChanged(self.epoch)

    def _level(self, key: str, rate: float, depth: float, now: float) -> float:
        got = self._s.buckets.get(key)
        if got is None:
            return depth
        lvl, at = got
        return refilled(lvl, rate, depth, now - at)

    def _expire_one(self, rid: str) -> str | None:
        r = self._s.res.get(rid)
        if r is None or r.state != "open":
            return None
        r.state = "expired"
        self._s.inflight.get(r.inflight_key, {}).pop(rid, None)
        return r.meta

    def _gc(self, now: float) -> None:
        """Forget idempotency answers and settled records past their TTL (every 1024 ops)."""
        self._ops += 1
        if self._ops % 1024:
            return
        self._s.idem = {k: v for k, v in self._s.idem.items() if v[1] > now}
        self._s.res = {k: v for k, v in self._s.res.items() if v.gone_at > now or v.state == "open"}
        # A period bucket outlives its boundary by a day, as its Redis key's expiry does.
        self._s.periods = {k: v for k, v in self._s.periods.items() if v[1] + 86400 > now}

    def reserve(self, op: ReserveOp) -> Answer:
        s, rid = op.scope, op.reservation_id
        self._check_epoch(op.epoch)
        with self._lock:
            now = self.clock()
            self._gc(now)
            replayed = self._replay(rid, now)
            if replayed is not None:
                return dataclasses.replace(replayed, quota=self._quota(op, now))
            scope = self._s.inflight.setdefault(s.inflight_key, {})
            # Expire on access: up to 16 of this scope's reservations past their TTL (at the cap, all).
            # Insertion order is expiry order (one TTL per scope), so the scan stops at the first live one.
            v = inputs.of(s)  # the scope's inputs by the names reserve.lua reads (inputs.py)
            at_cap = len(scope) >= v["max_concurrency"]
            due = list(takewhile(lambda kv: kv[1] <= now, scope.items()))
            expired = [m for r, _ in (due if at_cap else due[:16]) if (m := self._expire_one(r))]
            if len(scope) >= v["max_concurrency"]:
                return self._throttle(op, "CONCURRENCY_LIMIT", 0.0, now, expired)
            charges = self._periods_now(op, now)  # period key, limit, end, used
            lim = s.limits
            if lim is not None:
                # Budgets, then the request rate, then the token rate: the same order as reserve.lua.
                until = 0.0
                for _, limit, end, used in charges:
                    if spent(used, op.units, limit):
                        until = max(until, end)
                if until:
                    return self._throttle(op, reasons.BUDGET_EXHAUSTED, until - now, now, expired)
                if lim.rps is not None:
                    rq = lim.rps
                    rps_l = self._level(rq.key, rq.rate, rq.depth, now)
                    if rps_l < 1:
                        return self._throttle(
                            op, reasons.QUOTA_EXCEEDED, _wait(1 - rps_l, rq.rate), now, expired, "rps"
                        )
            own_l = self._level(s.own.key, v["own_rate"], v["own_depth"], now)
            pool_l = self._level(s.pool.key, v["pool_rate"], v["pool_depth"], now)
            b = s.borrow
            # Read only when the own bucket falls short, as the script does (decide() needs it only then).
            bor_l = self._level(b.key, v["borrow_rate"], v["borrow_depth"], now) if b and own_l < op.cost else 0.0
            verdict, what, wait = decide(op, own_l, pool_l, bor_l)
            sh = s.share
            # Lending limits and fair share (issue 36.3, reserve.lua's twin): only where it borrows.
            # Every borrowed attempt (admitted or refused) keeps the scope active for active_s.
            borrowing = sh is not None and b is not None and own_l < op.cost and bor_l >= op.cost
            lending: tuple[tuple[str, float, float, float], ...] = ()
            fair_rec = None
            if verdict == "throttle":
                if borrowing:
                    self._fair_entry(op, now, bor_l)
                return self._throttle(op, what, wait, now, expired, own_l=own_l)
            if what == "borrowed" and sh is not None:
                room = pool_l - v["margin"]  # what borrowers may take: the pool above the reclaim margin...
                lend = sh.lend
                lend_l = 0.0
                if lend is not None:  # ...and within the lenders' limits
                    lend_l = self._level(lend.key, v["lend_rate"], v["lend_depth"], now)
                    if lend_l < op.cost:
                        self._fair_entry(op, now, bor_l)
                        wait = _wait(op.cost - lend_l, v["lend_rate"])  # until the lend bucket has room for it
                        return self._throttle(op, reasons.QUOTA_EXCEEDED, wait, now, expired, "lending", own_l)
                    room = min(room, lend_l)
                mine, used, weights, others = self._fair_read(op, now)
                if not fair.fair_ok(mine, v["weight"], used + room, weights, room, op.cost, others):
                    self._fair_entry(op, now, bor_l)
                    return self._throttle(op, reasons.QUOTA_EXCEEDED, 0.0, now, expired, "fair_share", own_l)
                if lend is not None:
                    self._s.buckets[lend.key] = (lend_l - op.cost, now)
                    lending = ((lend.key, v["lend_rate"], v["lend_depth"], op.cost),)
                self._fair_entry(op, now, bor_l - op.cost, add=op.cost)
                fair_rec = (sh.fair, sh.member, v["weight"], v["window_s"], op.cost, now)
            elif what == "entitlement" and s.lends is not None:
                lending = self._lender_charge(s.lends, op.cost, now)
            if what == "borrowed" and b is not None:
                charged = (b.key, b.rate, b.depth)
                self._s.buckets[b.key] = (bor_l - op.cost, now)
                self._s.buckets[s.own.key] = (own_l, now)
            else:
                charged = (s.own.key, s.own.rate, s.own.depth)
                self._s.buckets[s.own.key] = (own_l - op.cost, now)
            self._s.buckets[s.pool.key] = (bounded(pool_l - op.cost, s.pool.depth), now)
            budget = None
            if lim is not None:
                if lim.rps is not None:
                    self._s.buckets[lim.rps.key] = (rps_l - 1, now)
                for key, _, end, used in charges:
                    self._s.periods[key] = (used + op.units, end)
                budget = (lim.unit, op.units, tuple((k, lm, e) for k, lm, e, _ in charges))
            expires = now + s.ttl_s
            scope[rid] = expires
            self._s.res[rid] = _Res(
                "open", s.inflight_key, charged, (s.pool.key, s.pool.rate, s.pool.depth),
                op.cost, s.w_out, s.w_cached, borrowed_meta(op.meta) if what == "borrowed" else op.meta,
                expires + s.idem_ttl_s, s.max_output, budget=budget, lending=lending, fair=fair_rec,
            )  # fmt: skip
            raw = f"A|{rid}|{op.cost!r}|{what}|{expires!r}"
            self._s.idem[rid] = (raw, expires + s.idem_ttl_s)
            return Answer(
                raw=raw, replay=False, expired_metas=expired, in_flight=len(scope), quota=self._quota(op, now)
            )

    def _periods_now(self, op: ReserveOp, now: float) -> list[tuple[str, float, float, float]]:
        """The period buckets in force at `now`: (key, limit, end, used) each (reserve.lua's periods_now)."""
        lim = op.scope.limits
        out: list[tuple[str, float, float, float]] = []
        if lim is None:
            return out
        for per in lim.periods:
            pid, _, end = periods_at(per.kind, lim.tz, now)[1]
            key = f"{per.key}:{pid}"
            out.append((key, per.limit, end, self._s.periods.get(key, (0.0, end))[0]))
        return out

    def _quota(self, op: ReserveOp, now: float) -> str | None:
        """What the scope's buckets hold now, under the lock this operation holds (reserve.lua's quota())."""
        if not op.quota:
            return None
        s, lim = op.scope, op.scope.limits
        rps = lim.rps if lim is not None and has_rps(s) else None
        rq = (self._level(rps.key, rps.rate, rps.depth, now), rps.rate, rps.depth) if rps is not None else None
        left = tuple(limit - used for _, limit, _, used in self._periods_now(op, now))
        return quota_raw(now, self._level(s.own.key, s.own.rate, s.own.depth, now), s.own.rate, s.own.depth, rq, left)

    def _throttle(
        self, op: ReserveOp, reason: str, wait: float, now: float, expired: list[str], limit: str = "",
        own_l: float | None = None,
    ) -> Answer:  # fmt: skip
        """`limit`: which limit a QUOTA_EXCEEDED hit when it is not the token rate ("rps"); `own_l`: the
        own bucket's level once read (None before: budgets, the request rate, concurrency)."""
        ra = retry_after_s(reason, wait, op.scope.retry_defaults)
        raw = f"T|{reason}|{ra}|{limit}" if limit else f"T|{reason}|{ra}"
        if op.overflow and own_l is not None and own_l < op.cost and reason in SPILLABLE:
            # A spill may follow (reserve.lua's twin): the hand-off marker, kept as long as an admit's
            # record, so every retry of the request goes to the spill path, never back to this bucket.
            raw = "S" + raw[1:]
            self._s.idem[op.reservation_id] = (raw, now + op.scope.ttl_s + op.scope.idem_ttl_s)
        else:
            self._s.idem[op.reservation_id] = (raw, now + max(1, min(3600, ra)))  # as reserve.lua: at most an hour
        return Answer(raw=raw, replay=False, expired_metas=expired, quota=self._quota(op, now))

    def _replay(self, rid: str, now: float) -> Answer | None:
        """The answer a request id already got, while its record lives (the lock is held)."""
        prev = self._s.idem.get(rid)
        if prev is None or prev[1] <= now:
            return None
        r = self._s.res.get(rid)
        return Answer(raw=prev[0], replay=True, expired_metas=[], settled=r is not None and r.state != "open")

    def spill(self, op: SpillOp) -> Answer:
        """The second call of a spilled reserve (lua/spill.lua's twin): replay the request's spill answer,
        or decide it (base.spill_decide) and record it under its own name."""
        sp, rid = op.spill, op.reservation_id
        with self._lock:
            now = self.clock()
            self._gc(now)
            replayed = self._replay(rid, now)
            if replayed is not None:
                return replayed
            b, p, ln = sp.bucket, sp.pool, sp.lend
            spill_l = self._level(b.key, b.rate, b.depth, now)
            pool_l = self._level(p.key, p.rate, p.depth, now)
            lend_l = self._level(ln.key, ln.rate, ln.depth, now) if ln is not None else None
            if not spill_decide(op, spill_l, pool_l, lend_l):
                ra = int(op.fallback.split("|")[2])
                self._s.idem[rid] = (op.fallback, now + max(1, min(3600, ra)))
                return Answer(raw=op.fallback, replay=False, expired_metas=[])
            self._s.buckets[b.key] = (spill_l - op.cost, now)
            self._s.buckets[p.key] = (bounded(pool_l - op.cost, p.depth), now)
            lending: tuple[tuple[str, float, float, float], ...] = ()
            if ln is not None and lend_l is not None:
                self._s.buckets[ln.key] = (lend_l - op.cost, now)
                lending = ((ln.key, ln.rate, ln.depth, op.cost),)
            expires = now + op.ttl_s
            scope = self._s.inflight.setdefault(sp.inflight_key, {})
            scope[rid] = expires
            self._s.res[rid] = _Res(
                "open", sp.inflight_key, (b.key, b.rate, b.depth), (p.key, p.rate, p.depth), op.cost, op.w_out,
                op.w_cached, op.meta, expires + op.idem_ttl_s, op.max_output, lending=lending,
            )  # fmt: skip
            raw = f"A|{rid}|{op.cost!r}|spillover|{expires!r}"
            self._s.idem[rid] = (raw, expires + op.idem_ttl_s)
            return Answer(raw=raw, replay=False, expired_metas=[], in_flight=len(scope))

    def complete(self, op: CompleteOp) -> Settled | None:
        self._check_epoch(op.epoch)
        with self._lock:
            now = self.clock()
            r = self._s.res.get(op.reservation_id)
            if r is None or r.gone_at <= now and r.state != "open":
                return self._settle_lost(op, now) if op.lost is not None and not self._throttled(op, now) else None
            if r.state == "done":
                return Settled(result=dict(r.result or {}), replay=True, meta=None)
            if r.state == "expired" or now >= self._s.inflight.get(r.inflight_key, {}).get(op.reservation_id, now):
                # Past its TTL: settled at the full estimate; whoever expires it reports it.
                first = self._expire_one(op.reservation_id)
                expired = {"reservation_id": op.reservation_id, "status": "expired", "reserved_wt": r.est,
                           "actual_wt": r.est, "refunded_wt": 0}  # fmt: skip
                return Settled(result=expired, replay=first is None, meta=first)
            cached, output = op.cached_prompt_tokens, min(op.output_tokens, r.max_out)
            actual = (op.prompt_tokens - cached) + r.w_cached * cached + r.w_out * output
            delta = r.est - actual
            for key, rate, depth in (r.charged, r.pool):
                self._s.buckets[key] = (bounded(self._level(key, rate, depth, now) + delta, depth), now)
            if delta != 0 and r.est > 0:  # issue 36.3: the lend accounts, in proportion (complete.lua's twin)
                for key, rate, depth, part in r.lending:
                    back = settled_part(delta, r.est, part)
                    self._s.buckets[key] = (bounded(self._level(key, rate, depth, now) + back, depth), now)
                if r.fair is not None:
                    self._fair_settle(r.fair, settled_part(delta, r.est, r.fair[4]), delta, now)
            if r.budget is not None:
                unit, units, periods = r.budget
                back = units - budget_units(unit, actual, op.prompt_tokens, output)
                for key, limit, end in periods:
                    if end > now:  # a period past its boundary is done: nothing settles into it
                        used = self._s.periods.get(key, (0.0, end))[0]
                        self._s.periods[key] = (bounded_used(used - back, limit), end)
            self._s.inflight.get(r.inflight_key, {}).pop(op.reservation_id, None)
            r.state = "done"
            r.result = {"reservation_id": op.reservation_id, "status": op.status, "reserved_wt": r.est,
                        "actual_wt": actual, "refunded_wt": delta}  # fmt: skip
            if output < op.output_tokens:
                r.result["output_cap"] = r.max_out
            r.gone_at = now + op.idem_ttl_s
            return Settled(result=dict(r.result), replay=False, meta=r.meta)

    def _throttled(self, op: CompleteOp, now: float) -> bool:
        prev = self._s.idem.get(op.reservation_id)
        return prev is not None and prev[1] > now and prev[0].startswith("T|")

    def _settle_lost(self, op: CompleteOp, now: float) -> Settled:
        """The store forgot the reservation: settle from what its signed id says (complete.lua's twin)."""
        lost = op.lost
        assert lost is not None
        rid, est = op.reservation_id, lost.estimate
        if 0 < lost.expires <= now:
            result = {
                "reservation_id": rid,
                "status": "expired",
                "reserved_wt": est,
                "actual_wt": est,
                "refunded_wt": 0,
            }
            return Settled(result=result, replay=False, meta=None, lost=True)
        cached, output = op.cached_prompt_tokens, min(op.output_tokens, lost.max_output)
        actual = (op.prompt_tokens - cached) + lost.w_cached * cached + lost.w_out * output
        for b in (lost.charged, lost.pool):
            self._s.buckets[b.key] = (bounded(self._level(b.key, b.rate, b.depth, now) - actual, b.depth), now)
        if lost.limits is not None:  # the budgets too, in their unit, while the period lasts
            units = budget_units(lost.limits.unit, actual, op.prompt_tokens, output)
            for key, limit, end in lost_charges(lost, now):
                if end > now:
                    used = self._s.periods.get(key, (0.0, end))[0]
                    self._s.periods[key] = (bounded_used(used + units, limit), end)
        result = {"reservation_id": rid, "status": op.status, "reserved_wt": est, "actual_wt": actual,
                  "refunded_wt": est - actual}  # fmt: skip
        if output < op.output_tokens:
            result["output_cap"] = lost.max_output
        gone = now + op.idem_ttl_s
        c, p = lost.charged, lost.pool
        self._s.res[rid] = _Res("done", "", (c.key, c.rate, c.depth), (p.key, p.rate, p.depth), est, lost.w_out,
                                lost.w_cached, "", gone, lost.max_output, dict(result))  # fmt: skip
        self._s.idem[rid] = (lost.answer, gone)
        return Settled(result=result, replay=False, meta=None, lost=True)

    def sweep(self, limit: int = 1000) -> list[str]:
        with self._lock:
            now = self.clock()
            out: list[str] = []
            for scope in self._s.inflight.values():
                for rid, exp in list(scope.items()):
                    if exp <= now and len(out) < limit and (m := self._expire_one(rid)):
                        out.append(m)
            return out

    def inflight(self, inflight_key: str) -> int:
        with self._lock:
            return len(self._s.inflight.get(inflight_key, {}))

    def seed_period_usage(self, period: Period, tz: str, used: float) -> str:
        """Set (never add) what the current `period` bucket has spent: usage carried from another
        gateway (import_atlas), so a second import changes nothing. → the bucket's key."""
        with self._lock:
            pid, _, end = periods_at(period.kind, tz, self.clock())[1]
            key = f"{period.key}:{pid}"
            self._s.periods[key] = (float(used), end)
            return key

    def add_period_usage(self, period_key: str, delta: float, end: float) -> None:
        """Add usage carried from another gateway to a period bucket ('<stem>:<period id>') that
        ends at `end` (admission.atlas_carry applies the import's hand-off rows with it)."""
        with self._lock:
            used = self._s.periods.get(period_key, (0.0, end))[0]
            self._s.periods[period_key] = (max(0.0, used + float(delta)), end)

    def used(self, period_key: str) -> float | None:
        """What a period bucket ('<stem>:<period id>') has spent, None when untouched."""
        with self._lock:
            got = self._s.periods.get(period_key)
            return None if got is None else got[0]

    def level(self, bucket_key: str) -> float | None:
        with self._lock:
            got = self._s.buckets.get(bucket_key)
            return None if got is None else got[0]

    def bucket_state(self, bucket_key: str) -> tuple[float, float] | None:
        """(level, when it was written, by this store's clock) as stored; None when untouched (full)."""
        with self._lock:
            return self._s.buckets.get(bucket_key)

    def ping(self) -> None:
        return None

    def clear(self) -> None:
        with self._lock:
            self._s = _Store()
            self.usd = MemoryUsd(lambda: self.clock())
