"""What a running Atlas holds (issue 24.1), read from its Redis layout, and the key map.

Atlas (github.com/BugVanquisher/Atlas, Apache-2.0; read at commit e2aa4ae09b57) keeps, per API key, a
limits hash `limits:{api_key}` (`daily_limit`, `monthly_limit` in tokens, `rate_per_sec`, `burst`,
`priority` low/normal/high/critical: gateway/quota.py lines 10-12) and usage counters
`usage:d:{api_key}:{YYYYMMDD}` / `usage:m:{api_key}:{YYYYMM}` (UTC, gateway/utils.py line 5).
What Atlas does with a key's hash, and so what the importer does (gateway/quota.py `get_limits`):
- no hash at all: every value is its default (lines 63-72), priority `normal`;
- a field the hash lacks: that field's default (lines 73-78, `_get_int`/`_get_float` at 30-43);
- the defaults are fixed settings (gateway/config.py lines 29-32): daily_limit 100,000,
  monthly_limit 1,000,000, rate_per_sec 2.0, burst 5 (`ATLAS_DEFAULTS`; the command's --default-*
  options override them for an Atlas deployed with other DEFAULT_* settings);
- a priority outside the four reads as `normal` (`_normalize_priority`, lines 46-50), so `urgent`
  imports as normal, the line saying so;
- a limit of 0 refuses every request with tokens (`used + tokens > limit`, lines 153-158): it imports
  as a budget of 0 (docs/contract.md §8).
Atlas falls back to the default for a value it cannot parse as well; the importer refuses such a key
instead, naming the field, so a typo in Atlas is fixed rather than carried silently.

The map is telemetry.atlas_map's (one parser for the preset and the importer). Atlas's Redis is read
as bytes: a key name that is not UTF-8 cannot be named in a (UTF-8) map, so it is reported and skipped.
Bad input is reported per row or per key with the field it is about; nothing here writes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from capacity.input_errors import FieldError
from telemetry.atlas_map import MapError, MapRow, decode_lines, read_map

PRIORITIES = ("low", "normal", "high", "critical")
NORMAL = "normal"  # what Atlas reads an unknown or missing priority as


class AtlasInputError(FieldError):
    """A row or key that cannot be imported: `where` names it, `field` the field at fault."""

    def __init__(self, where: str, field: str, message: str) -> None:
        super().__init__(field, message, text=f"{where}: {field}: {message}")
        self.where = where


@dataclass(frozen=True)
class AtlasLimits:
    """One key's limits as Atlas enforces them: its hash, its defaults where the hash is silent."""

    daily: int | None
    monthly: int | None
    rate_per_sec: float | None
    burst: int | None
    priority: str
    from_defaults: bool  # no limits hash: every value is a default
    notes: tuple[str, ...] = ()  # what was not read from the hash as written (defaults, priority)


# gateway/config.py lines 29-32 (DEFAULT_DAILY_LIMIT, DEFAULT_MONTHLY_LIMIT, DEFAULT_RATE_PER_SEC,
# DEFAULT_BURST) and gateway/quota.py line 69 (priority "normal") at Atlas commit e2aa4ae09b57.
ATLAS_DEFAULTS = AtlasLimits(100_000, 1_000_000, 2.0, 5, NORMAL, from_defaults=True)


@dataclass(frozen=True)
class AtlasUsage:
    day: int  # tokens today (UTC)
    month: int  # tokens this month (UTC)


def map_problem(e: MapError) -> AtlasInputError:
    return AtlasInputError(f"map line {e.line}", e.field, e.message)


def read_map_file(data: bytes) -> tuple[list[MapRow], list[AtlasInputError]]:
    """The --map file's bytes through the one map parser (telemetry.atlas_map)."""
    lines, undecodable = decode_lines(data)
    rows, bad = read_map(lines)
    return rows, [map_problem(e) for e in sorted([*undecodable, *bad], key=lambda e: e.line)]


def limits_key(api_key: str) -> str:
    return f"limits:{api_key}"


def usage_keys(api_key: str, now: datetime) -> tuple[str, str]:
    """Today's and this month's usage counters (Atlas names them by the UTC date)."""
    return f"usage:d:{api_key}:{now:%Y%m%d}", f"usage:m:{api_key}:{now:%Y%m}"


def mask(api_key: str) -> str:
    """An API key as the diff and the audit trail show it: enough to recognise, never the secret."""
    return api_key if len(api_key) <= 8 else f"{api_key[:6]}…{api_key[-2:]}"


def parse_limits(api_key: str, h: dict[str, str] | None, defaults: AtlasLimits) -> AtlasLimits:
    """A limits hash read field by field as Atlas reads it (see the module's docstring)."""
    if not h:
        return defaults
    where = limits_key(mask(api_key))
    notes = [f"{f} {_shown(getattr(defaults, a))} (Atlas default)" for f, a in _FIELDS if not (h.get(f) or "").strip()]
    raw = (h.get("priority") or "").strip()
    priority = raw.lower() if raw.lower() in PRIORITIES else (NORMAL if raw else defaults.priority)
    if raw and raw.lower() not in PRIORITIES:
        notes.append(f"priority '{raw}' read as {NORMAL}, as Atlas does")
    return AtlasLimits(
        daily=_whole(where, "daily_limit", h.get("daily_limit"), defaults.daily),
        monthly=_whole(where, "monthly_limit", h.get("monthly_limit"), defaults.monthly),
        rate_per_sec=_rate(where, h.get("rate_per_sec"), defaults.rate_per_sec),
        burst=_whole(where, "burst", h.get("burst"), defaults.burst),
        priority=priority,
        from_defaults=False,
        notes=tuple(notes),
    )


_FIELDS = (("daily_limit", "daily"), ("monthly_limit", "monthly"), ("rate_per_sec", "rate_per_sec"), ("burst", "burst"))


def parse_usage(api_key: str, day: str | None, month: str | None) -> AtlasUsage:
    where = f"usage of {mask(api_key)}"
    return AtlasUsage(day=_whole(where, "usage:d", day, 0) or 0, month=_whole(where, "usage:m", month, 0) or 0)


def read_atlas(
    client: Any, api_keys: list[str], now: datetime
) -> dict[str, tuple[dict[str, str], str | None, str | None]]:
    """Per key: its limits hash (empty when missing) and its day and month usage counters, in one
    round trip. The client answers bytes: a value that is not UTF-8 reaches the field's check as
    text with U+FFFD in it, so it is refused naming that field."""
    pipe = client.pipeline(transaction=False)
    for k in api_keys:
        pipe.hgetall(limits_key(k))
        for u in usage_keys(k, now):
            pipe.get(u)
    got = pipe.execute()
    return {
        k: ({_text(f): _text(v) for f, v in got[3 * i].items()}, _opt(got[3 * i + 1]), _opt(got[3 * i + 2]))
        for i, k in enumerate(api_keys)
    }


def unmapped_keys(client: Any, mapped: set[str]) -> tuple[list[str], list[str]]:
    """Keys with a limits hash in Atlas that the map does not name (reported, not imported), and the
    names that are not UTF-8 (shown escaped: no map can name them, so they are skipped)."""
    out, undecodable = [], []
    for raw in client.scan_iter(match=b"limits:*", count=1000):
        name = raw[len(b"limits:") :]
        try:
            k = name.decode("utf-8") if isinstance(name, bytes) else name
        except UnicodeDecodeError:
            undecodable.append(repr(bytes(raw))[2:-1])
            continue
        if k not in mapped:
            out.append(k)
    return sorted(out), sorted(undecodable)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _opt(v: Any) -> str | None:
    return None if v is None else _text(v)


def _shown(v: float | None) -> str:
    return "none" if v is None else f"{v:,}" if float(v).is_integer() and not isinstance(v, float) else f"{v:g}"


def _whole(where: str, field: str, v: str | None, default: int | None) -> int | None:
    if v is None or v.strip() == "":
        return default
    try:
        n = float(v)
    except ValueError:
        raise AtlasInputError(where, field, f"'{v}' is not a number") from None
    if not math.isfinite(n) or n < 0 or n != int(n):
        raise AtlasInputError(where, field, f"'{v}' is not a whole number ≥ 0")
    return int(n)


def _rate(where: str, v: str | None, default: float | None) -> float | None:
    if v is None or v.strip() == "":
        return default
    try:
        n = float(v)
    except ValueError:
        raise AtlasInputError(where, "rate_per_sec", f"'{v}' is not a number") from None
    if not math.isfinite(n) or n <= 0:
        raise AtlasInputError(where, "rate_per_sec", f"'{v}' must be greater than 0")
    return n
