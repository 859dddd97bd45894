"""The Redis store's $ accounts (admission.usd): lua/usd.lua through the backend's breaker and
connections (a call the breaker refuses is StoreUnavailable, as a reserve's is)."""

from __future__ import annotations

from typing import Any

from admission.usd import ACCOUNT_TTL_S, UsdAnswer, UsdHold


def _keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(x for k in keys for x in (k, k + ":x"))


def hold(backend: Any, script: Any, h: UsdHold) -> UsdAnswer:
    ks = _keys(h.keys)
    args = (*ks, "hold", h.rid, repr(h.usd), repr(h.ttl_s), str(int(ACCOUNT_TTL_S)), *(repr(v) for v in h.limits))
    out, _ = backend._eval(script, len(ks), args)
    verdict, left, replay = (x.decode() if isinstance(x, bytes) else str(x) for x in out)
    return UsdAnswer(verdict == "A", float(left), replay=replay == "1")


def settle(backend: Any, script: Any, keys: tuple[str, ...], rid: str, usd: float | None) -> bool:
    if not keys:
        return False
    ks = _keys(keys)
    out, _ = backend._eval(script, len(ks), (*ks, "settle", rid, "" if usd is None else repr(usd), "0", "0"))
    return bool(int(out))


def spent(backend: Any, key: str) -> tuple[float, float] | None:
    v = backend.client.hmget(key, "spent", "held")
    if v[0] is None and v[1] is None:
        return None
    return float(v[0] or 0), max(0.0, float(v[1] or 0))
