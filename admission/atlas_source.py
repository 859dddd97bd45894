"""What a running Atlas holds (issue 24.1), read from its documented Redis layout and the mapping CSV.

Atlas keeps, per API key, a limits hash `limits:{api_key}` (`daily_limit`, `monthly_limit` in
tokens, `rate_per_sec`, `burst`, `priority` low/normal/high/critical) and usage counters
`usage:d:{api_key}:{YYYYMMDD}` / `usage:m:{api_key}:{YYYYMM}` (UTC). A key without a limits hash
runs on Atlas's defaults (given to the importer as options). The map (CONTRACT §8) is a CSV
`api_key,tenant,project,model,region` saying where each key's traffic lands in Headroom.

Bad input is reported per row or per key with the field it is about; nothing here writes.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAP_FIELDS = ("api_key", "tenant", "project", "model", "region")
REQUIRED = ("api_key", "tenant", "model", "region")  # project may be empty: the tenant-wide scope
PRIORITIES = ("low", "normal", "high", "critical")


class AtlasInputError(ValueError):
    """A row or key that cannot be imported: `where` names it, `field` the field at fault."""

    def __init__(self, where: str, field: str, message: str) -> None:
        super().__init__(f"{where}: {field}: {message}")
        self.where, self.field, self.message = where, field, message


@dataclass(frozen=True)
class MapRow:
    line: int
    api_key: str
    tenant: str
    project: str  # "" = no project
    model: str
    region: str


@dataclass(frozen=True)
class AtlasLimits:
    """One key's limits: its hash, or Atlas's defaults (from the options) where the hash is missing."""

    daily: int | None
    monthly: int | None
    rate_per_sec: float | None
    burst: int | None
    priority: str
    from_defaults: bool  # no limits hash: every value is a default


@dataclass(frozen=True)
class AtlasUsage:
    day: int  # tokens today (UTC)
    month: int  # tokens this month (UTC)


def read_map(text: str) -> tuple[list[MapRow], list[AtlasInputError]]:
    """The mapping rows and, separately, the bad ones (a bad row never drops the good ones)."""
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None or tuple(h.strip() for h in header) != MAP_FIELDS:
        raise AtlasInputError("map line 1", "header", f"must be exactly {','.join(MAP_FIELDS)}")
    rows: list[MapRow] = []
    errors: list[AtlasInputError] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(reader, start=2):
        if not raw or all(not c.strip() for c in raw):
            continue
        where = f"map line {i}"
        if len(raw) != len(MAP_FIELDS):
            errors.append(AtlasInputError(where, "row", f"has {len(raw)} fields, expected {len(MAP_FIELDS)}"))
            continue
        vals = dict(zip(MAP_FIELDS, (c.strip() for c in raw), strict=True))
        missing = next((f for f in REQUIRED if not vals[f]), None)
        if missing is not None:
            errors.append(AtlasInputError(where, missing, "is required"))
            continue
        if vals["api_key"] in seen:
            errors.append(AtlasInputError(where, "api_key", f"already mapped on line {seen[vals['api_key']]}"))
            continue
        seen[vals["api_key"]] = i
        rows.append(MapRow(i, **vals))
    return rows, errors


def limits_key(api_key: str) -> str:
    return f"limits:{api_key}"


def usage_keys(api_key: str, now: datetime) -> tuple[str, str]:
    """Today's and this month's usage counters (Atlas names them by the UTC date)."""
    return f"usage:d:{api_key}:{now:%Y%m%d}", f"usage:m:{api_key}:{now:%Y%m}"


def mask(api_key: str) -> str:
    """An API key as the diff and the audit trail show it: enough to recognise, never the secret."""
    return api_key if len(api_key) <= 8 else f"{api_key[:6]}…{api_key[-2:]}"


def parse_limits(api_key: str, h: dict[str, str] | None, defaults: AtlasLimits) -> AtlasLimits:
    """A limits hash read field by field; a field the hash lacks takes the default."""
    if not h:
        return defaults
    where = limits_key(mask(api_key))
    priority = h.get("priority", defaults.priority).strip().lower()
    if priority not in PRIORITIES:
        raise AtlasInputError(where, "priority", f"'{priority}' is not one of {', '.join(PRIORITIES)}")
    return AtlasLimits(
        daily=_whole(where, "daily_limit", h.get("daily_limit"), defaults.daily),
        monthly=_whole(where, "monthly_limit", h.get("monthly_limit"), defaults.monthly),
        rate_per_sec=_rate(where, h.get("rate_per_sec"), defaults.rate_per_sec),
        burst=_whole(where, "burst", h.get("burst"), defaults.burst),
        priority=priority,
        from_defaults=False,
    )


def parse_usage(api_key: str, day: str | None, month: str | None) -> AtlasUsage:
    where = f"usage of {mask(api_key)}"
    return AtlasUsage(day=_whole(where, "usage:d", day, 0) or 0, month=_whole(where, "usage:m", month, 0) or 0)


def read_atlas(
    client: Any, api_keys: list[str], now: datetime
) -> dict[str, tuple[dict[str, str], str | None, str | None]]:
    """Per key: its limits hash (empty when missing) and its day and month usage counters, in one round trip."""
    pipe = client.pipeline(transaction=False)
    for k in api_keys:
        pipe.hgetall(limits_key(k))
        for u in usage_keys(k, now):
            pipe.get(u)
    got = pipe.execute()
    return {k: (got[3 * i], got[3 * i + 1], got[3 * i + 2]) for i, k in enumerate(api_keys)}


def unmapped_keys(client: Any, mapped: set[str]) -> list[str]:
    """Keys with a limits hash in Atlas that the map does not name (reported, not imported)."""
    out = []
    for raw in client.scan_iter(match="limits:*", count=1000):
        k = raw[len("limits:") :]
        if k not in mapped:
            out.append(k)
    return sorted(out)


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
