"""The Atlas key map (CONTRACT §8): CSV `api_key,tenant,project,model,region`, one key a line.

Read by the Atlas Prometheus preset (telemetry.atlas_pull) from PrometheusSource.atlas_map. An optional
header line, blank lines and `#` comments are skipped; every bad line is reported by number, so an operator
fixes the whole map in one save.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from entitlements.models import Tenant

HEADER = ["api_key", "tenant", "project", "model", "region"]


@dataclass(frozen=True)
class KeyOwner:
    tenant: str
    project: str
    model: str
    region: str


def parse_atlas_map(text: str) -> tuple[dict[str, KeyOwner], list[str]]:
    """api_key → owner, and one message per bad line ("line 3: ..."); the good lines are kept either way."""
    owners: dict[str, KeyOwner] = {}
    errors: list[str] = []
    rows: list[tuple[int, list[str]]] = []
    seen: set[str] = set()
    for number, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not any(cells) or cells[0].startswith("#"):
            continue
        if [c.lower() for c in cells] == HEADER:
            continue
        if len(cells) != len(HEADER):
            errors.append(f"line {number}: expected 5 columns {','.join(HEADER)}, got {len(cells)}")
            continue
        api_key, tenant = cells[0], cells[1]
        if not api_key:
            errors.append(f"line {number}: api_key is empty")
        elif not tenant:
            errors.append(f"line {number}: tenant is empty")
        elif api_key in seen:
            errors.append(f"line {number}: api_key {api_key!r} is mapped twice")
        else:
            seen.add(api_key)
            rows.append((number, cells))
    known = set(Tenant.objects.filter(slug__in={r[1] for _, r in rows}).values_list("slug", flat=True))
    for number, (api_key, tenant, project, model, region) in rows:
        if tenant not in known:  # a pull counts this key as unmapped rather than inventing a tenant
            errors.append(f"line {number}: tenant {tenant!r} does not exist")
            continue
        owners[api_key] = KeyOwner(tenant, project, model, region)
    errors.sort(key=lambda e: int(e.split(":")[0].removeprefix("line ")))
    return owners, errors
