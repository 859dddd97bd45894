"""The snapshot's scopes held scope by scope, so a refresh re-derives only what it re-read (issue 35.2).

A full read (`load`) and an incremental one (`replace`: the groups of a few scopes read again by
admission.scope_sums.read(t, scopes)) go through the same per-scope derivation, and nothing in a
scope's result depends on the order its groups came in (sorted by lowest pk) or on the other
scopes, so the table after any run of replacements equals the table a full read gives. Pool totals
(reserved wt/s, sold CU, withheld wt/s) are kept per pool as each scope's share and added with
math.fsum, which rounds the exact sum once: the same float whichever order the shares arrived in.
A window starting or ending re-derives only the scopes whose next boundary passed (`advance`).
"""

from __future__ import annotations

from math import fsum
from typing import Any

from admission import budgets
from admission import scope_sums as ss
from admission.budgets import LimitSpec
from admission.scope_sums import IdKey, Key, Sums
from admission.snapshot_types import ScopeParams

Group = tuple[Any, ...]
KINDS = 3  # a scope's share of its pools' totals: reserved wt/s, sold CU, withheld wt/s (None: no share)


class Table:
    def __init__(self) -> None:
        self.groups: dict[IdKey, list[Group]] = {}
        self.limits: dict[IdKey, list[tuple[Any, ...]]] = {}
        self.scopes: dict[Key, ScopeParams] = {}  # the active scopes, as the snapshot holds them
        self.names: dict[IdKey, Key] = {}  # the scopes in self.scopes, by ids
        self.bounds: dict[IdKey, float] = {}  # each scope's next window start or end
        self.shares: dict[IdKey, dict[int, list[float | None]]] = {}
        self.members: dict[int, dict[IdKey, list[float | None]]] = {}  # pool → the scopes with a share
        self._totals: tuple[dict[int, float], ...] = ({}, {}, {})
        self._dirty_pools: set[int] = set()

    def load(self, sums: Sums, t: float) -> None:
        """Everything from a full read."""
        self.__init__()  # type: ignore[misc]
        by_key = _by_key(sums)
        for k in by_key[0].keys() | by_key[1].keys():
            self._put(k, by_key, t)

    def replace(self, keys: set[IdKey], sums: Sums, t: float) -> set[str]:
        """The scopes `keys` as read again in `sums` (a scope without rows there is gone) → the
        ScopeParams.key of each scope whose parameters changed (added, removed or different)."""
        by_key = _by_key(sums)
        changed: set[str] = set()
        for k in keys:
            got = self._put(k, by_key, t)
            if got:
                changed |= got
        return changed

    def advance(self, t: float) -> set[str]:
        """Re-derive the scopes a window start or end has reached by t (no query)."""
        changed: set[str] = set()
        for k in [k for k, b in self.bounds.items() if b <= t]:
            got = self._derive(k, t)
            if got:
                changed |= got
        return changed

    def next_boundary(self) -> float | None:
        return min(self.bounds.values(), default=None)

    def totals(self) -> tuple[dict[int, float], ...]:
        """(reserved wt/s, sold CU, withheld wt/s) per pool; a pool appears where some scope has a share."""
        for pool in self._dirty_pools:
            members = self.members.get(pool, {})
            for i, total in enumerate(self._totals):
                vals = [v for s in members.values() if (v := s[i]) is not None]
                if vals:
                    total[pool] = fsum(vals)
                else:
                    total.pop(pool, None)
        self._dirty_pools.clear()
        return self._totals

    def _put(self, k: IdKey, by_key: tuple[dict[IdKey, list[Group]], dict[IdKey, list[Any]]], t: float) -> set[str]:
        groups, limits = by_key[0].get(k), by_key[1].get(k)
        if groups:
            self.groups[k] = groups
        else:
            self.groups.pop(k, None)
        if limits:
            self.limits[k] = limits
        else:
            self.limits.pop(k, None)
        return self._derive(k, t)

    def _derive(self, k: IdKey, t: float) -> set[str]:
        groups = self.groups.get(k, [])
        acc: list[Any] | None = None
        nxt: float | None = None
        shares: dict[int, list[float | None]] = {}
        for g in groups:
            starts, ends = g[ss.G_STARTS], g[ss.G_ENDS]
            if starts > t:
                nxt = starts if nxt is None or starts < nxt else nxt
                continue
            if ends is not None:
                if ends <= t:
                    continue
                nxt = ends if nxt is None or ends < nxt else nxt
            pool, cu, r = g[ss.G_POOL], g[ss.G_CU], g[ss.G_R]
            s = shares.get(pool)
            if s is None:
                s = shares[pool] = [None] * KINDS
            if g[ss.G_CLS] == "reserved":
                s[0] = (s[0] or 0.0) + cu * r
            if g[ss.G_SOLD]:
                s[1] = (s[1] or 0.0) + cu
            limited = bool(g[ss.G_LIMITED])
            if limited:
                s[2] = (s[2] or 0.0) + g[ss.G_KEPT] * r
            rate, borrow = cu * r, (g[ss.G_BORROW] * r if g[ss.G_MAY_BORROW] else 0.0)
            if acc is None:  # groups come by lowest pk: the first names the scope and its pool
                acc = [g, rate, borrow, g[ss.G_PROMPT], g[ss.G_OUTPUT], g[ss.G_P95], g[ss.G_CONC], g[ss.G_TTFT],
                       g[ss.G_TPOT], g[ss.G_LEND], limited, g[ss.G_WEIGHT], g[ss.G_KEPT] * r]  # fmt: skip
                continue
            acc[1] += rate
            acc[2] += borrow
            acc[3], acc[4], acc[5] = max(acc[3], g[ss.G_PROMPT]), max(acc[4], g[ss.G_OUTPUT]), max(acc[5], g[ss.G_P95])
            acc[6] += g[ss.G_CONC]
            acc[7], acc[8] = max(acc[7], g[ss.G_TTFT]), max(acc[8], g[ss.G_TPOT])
            acc[9] += g[ss.G_LEND]
            acc[10] = acc[10] or limited
            acc[11] += g[ss.G_WEIGHT]
            acc[12] += g[ss.G_KEPT] * r
        if nxt is None:
            self.bounds.pop(k, None)
        else:
            self.bounds[k] = nxt
        self._share(k, shares)
        if acc is None:
            return self._name(k, None, None)
        g = acc[0]
        key = (g[ss.G_TENANT], g[ss.G_PROJECT] or "", g[ss.G_MODEL], g[ss.G_REGION], g[ss.G_CLS])
        return self._name(k, key, _params(key, acc, self._limits(k, t)))

    def _limits(self, k: IdKey, t: float) -> LimitSpec | None:
        lims: LimitSpec | None = None
        for _, _, starts, ends, *lim in self.limits.get(k, ()):
            if starts <= t and (ends is None or ends > t):
                lims = budgets.combine(lims, budgets.spec_of(dict(zip(ss.LIMIT_FIELDS, lim, strict=True))))
        return lims

    def _share(self, k: IdKey, shares: dict[int, list[float | None]]) -> None:
        old = self.shares.pop(k, {})
        if shares:
            self.shares[k] = shares
        for pool in old.keys() | shares.keys():
            if old.get(pool) == shares.get(pool):
                continue
            members = self.members.setdefault(pool, {})
            if pool in shares:
                members[k] = shares[pool]
            else:
                members.pop(k, None)
            self._dirty_pools.add(pool)

    def _name(self, k: IdKey, name: Key | None, sp: ScopeParams | None) -> set[str]:
        """Hold `sp` as scope k's parameters; an equal one already held is kept (its plans with it)."""
        old_name = self.names.get(k)
        old = None if old_name is None else self.scopes.get(old_name)
        if name is None or sp is None:
            if old_name is None:
                return set()
            del self.names[k]
            self.scopes.pop(old_name, None)
            return {old.key} if old else set()
        if old_name == name and old == sp:
            return set()
        if old_name is not None and old_name != name:
            self.scopes.pop(old_name, None)
        self.names[k] = name
        self.scopes[name] = sp
        return {sp.key} | ({old.key} if old else set())


def _by_key(sums: Sums) -> tuple[dict[IdKey, list[Group]], dict[IdKey, list[Any]]]:
    groups: dict[IdKey, list[Group]] = {}
    for g in sums.groups:
        groups.setdefault(ss.id_key(g), []).append(g)
    for gs in groups.values():
        gs.sort(key=lambda g: g[ss.G_FIRST])  # the database returns groups in no set order
    limits: dict[IdKey, list[Any]] = {}
    for row in sums.limits:  # by pk already
        limits.setdefault(row[1], []).append(row)
    return groups, limits


def _params(key: Key, acc: list[Any], limits: LimitSpec | None) -> ScopeParams:
    g = acc[0]
    return ScopeParams(
        ":".join(key), ss.canonical_uuid(g[ss.G_UUID]), key[4], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6],
        acc[7], acc[8], g[ss.G_W_OUT], g[ss.G_W_CACHED], g[ss.G_POOL], limits, acc[9] if acc[10] else None, acc[11],
        keep_back=acc[12],
    )  # fmt: skip


def derive(
    sums: Sums, t: float
) -> tuple[dict[Key, ScopeParams], dict[int, float], dict[int, float], float | None, dict[int, float]]:
    """At epoch second t: (scopes, reserved wt/s per pool, sold CU per pool, the next start or end,
    wt/s lenders keep back from borrowers per pool: issue 36.3). The whole table at once: the same
    per-scope derivation an incremental refresh runs on the scopes it re-sums (scope_sums.read(t, scopes))."""
    table = Table()
    table.load(sums, t)
    reserved, sold, withheld = table.totals()
    return dict(table.scopes), reserved, sold, table.next_boundary(), withheld
