"""Typed readers of the environment for config.settings (issue 34.4).

A bad value stops the process at start with ImproperlyConfigured naming the variable and the value
(`ADMISSION_REDIS_TIMEOUT_S='0,3' is not a number`), instead of a bare ValueError from float() with
no name in it, or, for booleans, a typo silently read as False. A variable set to the empty string
counts as unset (compose files write `X=` for "no value"). No Django settings here: plain functions.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ImproperlyConfigured

T = TypeVar("T")

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"0", "false", "no", "off"})


def _raw(name: str) -> str | None:
    raw = os.environ.get(name)
    return None if raw is None or raw.strip() == "" else raw.strip()


def _bad(name: str, raw: str, what: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name}={raw!r} is not {what}")


def _within(name: str, v: float, minimum: float | None, maximum: float | None) -> None:
    if (minimum is not None and v < minimum) or (maximum is not None and v > maximum):
        lo = "" if minimum is None else f"{minimum} ≤ "
        hi = "" if maximum is None else f" ≤ {maximum}"
        raise ImproperlyConfigured(f"{name}={v!r} is out of range ({lo}{name}{hi})")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_parsed(name: str, parse: Callable[[str], T], default: str = "") -> T:
    """A variable read by an app's own parser (e.g. accounts_oidc.conf.parse_map): its ValueError stops the
    start naming the variable. The app keeps the rule, config keeps the environment: no app imports config."""
    try:
        return parse(env_str(name, default))
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None


def env_float(name: str, default: float, *, minimum: float | None = None, maximum: float | None = None) -> float:
    raw = _raw(name)
    if raw is None:
        return float(default)
    try:
        v = float(raw)
    except ValueError:
        raise _bad(name, raw, "a number") from None
    if not math.isfinite(v):
        raise _bad(name, raw, "a finite number")
    _within(name, v, minimum, maximum)
    return v


def env_int(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    raw = _raw(name)
    if raw is None:
        return int(default)
    try:
        v = int(raw)
    except ValueError:
        raise _bad(name, raw, "a whole number") from None
    _within(name, v, minimum, maximum)
    return v


def env_bool(name: str, default: bool) -> bool:
    """1/0, true/false, yes/no, on/off (any case); anything else is refused, not read as False."""
    raw = _raw(name)
    if raw is None:
        return default
    low = raw.lower()
    if low in TRUE:
        return True
    if low in FALSE:
        return False
    raise _bad(name, raw, "a boolean (1/0, true/false, yes/no, on/off)")
