"""The remaining quota as the stores answer it (docs/contract.md §5): whole units left and seconds until
full, formatted by the one rule reserve.lua's quota() mirrors, and read back into fields (`Quota`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple


def whole(x: float) -> str:
    """A remaining amount as the headers give it: whole units, 0 for none, a debt or NaN."""
    return str(math.floor(x)) if x > 0 else "0"


def secs(s: float) -> str:
    """Seconds, rounded up to the millisecond, without trailing zeros ('12.5', '0')."""
    ms = math.ceil(s * 1000 - 1e-6)
    if ms <= 0:
        return "0"
    w, frac = divmod(ms, 1000)
    return str(w) if not frac else f"{w}.{frac:03d}".rstrip("0")


NEVER_S = 1e12  # a refill longer than this (~31,700 years, or a rate so small the wait overflows) reads 'never'


def to_full(level: float, rate: float, depth: float) -> str:
    """Seconds until a bucket at `level` is full again ('never' when it does not refill)."""
    if level >= depth:
        return "0"
    wait = (depth - level) / rate if rate > 0 else math.inf
    return secs(wait) if wait < NEVER_S else "never"


def quota_raw(now: float, own: float, own_rate: float, own_depth: float,
              rq: tuple[float, float, float] | None, left: Iterable[float]) -> str:  # fmt: skip
    """The remaining quota as a store answers it (reserve.lua's quota(); docs/contract.md §5), from levels:
    'tokens|reset[|requests|reset]|budget…|now', `rq` (level, rate, depth) of the request bucket where
    the scope has a request rate, `left` each budget's limit − used."""
    f = [whole(own), to_full(own, own_rate, own_depth)]
    if rq is not None:
        f += [whole(rq[0]), to_full(*rq)]
    f += map(whole, left)
    f.append(repr(now))
    return "|".join(f)


class Quota(NamedTuple):
    """A store's answer of the remaining quota (quota_raw's form), read into fields: whole weighted
    tokens left in the own bucket and seconds until it is full, the same for the request bucket (None:
    no request rate), what each period budget has left (in Limits.periods' order), at the store's `now`.
    The serving path does not build one: admission.core.quota_headers zips the answer with its names."""

    now: float
    tokens: str
    reset_tokens: str
    requests: str | None = None
    reset_requests: str | None = None
    budgets: tuple[str, ...] = ()

    @classmethod
    def parse(cls, raw: str | None, rps: bool) -> Quota | None:
        """`rps`: the scope has a request rate (has_rps), so the answer carries its pair."""
        if not raw:
            return None
        f = raw.split("|")
        if rps:
            return cls(float(f[-1]), f[0], f[1], f[2], f[3], tuple(f[4:-1]))
        return cls(float(f[-1]), f[0], f[1], None, None, tuple(f[2:-1]))

    @classmethod
    def of(cls, now: float, own: float, own_rate: float, own_depth: float,
           rq: tuple[float, float, float] | None, left: tuple[float, ...]) -> Quota:  # fmt: skip
        """From levels, by the stores' rule (quota_raw; repr(now) reads back as `now` exactly)."""
        q = cls.parse(quota_raw(now, own, own_rate, own_depth, rq, left), rq is not None)
        assert q is not None
        return q
