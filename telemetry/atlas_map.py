"""The Atlas key map (docs/contract.md §8): CSV `api_key,tenant,project,model,region`, one key a line.

The one parser of that file: the Atlas Prometheus preset (telemetry.atlas_pull, PrometheusSource.atlas_map)
and `manage.py import_atlas --map` (admission.atlas_source) both read it through `read_map`, so the README's
"the same CSV" holds rule for rule:
- a UTF-8 byte order mark is ignored; a header line is optional, but a line whose first cell is `api_key`
  must be exactly the header, or the whole map is refused (a reordered header would swap columns);
- blank lines and `#` comments are skipped;
- every other line has five columns; api_key, tenant, model and region are required, project may be
  empty (the tenant-wide scope); a key mapped twice is refused on its second line;
- a line that cannot be read (a NUL, bytes that are not UTF-8) is reported by number and skipped.
Every bad line is reported by number and field and the good ones are kept, so an operator fixes the whole
map in one go. Whether the names exist is the caller's check (the preset: the tenant; the importer: all four).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from entitlements.models import Tenant

HEADER = ("api_key", "tenant", "project", "model", "region")
REQUIRED = ("api_key", "tenant", "model", "region")
BOM = "\ufeff"


@dataclass(frozen=True)
class MapRow:
    line: int
    api_key: str
    tenant: str
    project: str  # "" = no project
    model: str
    region: str


@dataclass(frozen=True)
class KeyOwner:
    tenant: str
    project: str
    model: str
    region: str


@dataclass(frozen=True)
class MapError:
    """One bad line of the map: its number, the field at fault and what is wrong."""

    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


def decode_lines(data: bytes) -> tuple[list[str | None], list[MapError]]:
    """A map file's bytes → its lines (None for a line that is not UTF-8, reported by number)."""
    raw = data.removeprefix(BOM.encode())
    lines: list[str | None] = []
    errors: list[MapError] = []
    for number, chunk in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(chunk.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            lines.append(None)
            errors.append(MapError(number, "line", f"is not UTF-8 (byte {exc.start + 1}); skipped"))
    return lines, errors


def read_map(text: str | list[str | None]) -> tuple[list[MapRow], list[MapError]]:
    """The rows and, separately, the bad lines (a bad line never drops the good ones)."""
    lines: list[str | None] = list(text.removeprefix(BOM).splitlines() if isinstance(text, str) else text)
    if lines and lines[0] is not None:
        lines[0] = lines[0].removeprefix(BOM)
    rows: list[MapRow] = []
    errors: list[MapError] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if line is None:
            continue  # not UTF-8: decode_lines reported it
        if "\x00" in line:
            errors.append(MapError(number, "line", "contains a NUL character; skipped"))
            continue
        cells = [c.strip() for c in next(csv.reader([line]), [])]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if cells[0].lower() == HEADER[0]:
            if tuple(c.lower() for c in cells) != HEADER:  # the header decides the columns: read none
                return [], [MapError(number, "header", f"must be exactly {','.join(HEADER)}")]
            continue
        if len(cells) != len(HEADER):
            errors.append(MapError(number, "row", f"expected 5 columns {','.join(HEADER)}, got {len(cells)}"))
            continue
        vals = dict(zip(HEADER, cells, strict=True))
        missing = next((f for f in REQUIRED if not vals[f]), None)
        if missing is not None:
            errors.append(MapError(number, missing, "is empty"))
            continue
        if vals["api_key"] in seen:
            errors.append(MapError(number, "api_key", f"already mapped on line {seen[vals['api_key']]}"))
            continue
        seen[vals["api_key"]] = number
        rows.append(MapRow(number, **vals))
    return rows, errors


def parse_atlas_map(text: str) -> tuple[dict[str, KeyOwner], list[str]]:
    """The preset's reading: api_key → owner, and one message per bad line ("line 3: ..."), a tenant
    that does not exist included (a pull counts such a key as unmapped rather than inventing a tenant)."""
    rows, bad = read_map(text)
    errors = list(bad)
    known = set(Tenant.objects.filter(slug__in={r.tenant for r in rows}).values_list("slug", flat=True))
    owners: dict[str, KeyOwner] = {}
    for r in rows:
        if r.tenant not in known:
            errors.append(MapError(r.line, "tenant", f"'{r.tenant}' does not exist"))
            continue
        owners[r.api_key] = KeyOwner(r.tenant, r.project, r.model, r.region)
    errors.sort(key=lambda e: e.line)
    return owners, [str(e) for e in errors]
