"""`manage.py import_atlas --redis-url URL --map FILE [--apply]`: bring Atlas's API keys over (issue 24.1).

A dry run by default: prints the diff (one line per mapped key) and writes nothing. `--apply`
writes the same diff through the entitlement services, audited with the importer as actor, and
carries today's and this month's usage into the period buckets. The rules: admission.atlas_import.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from admission import atlas_import, atlas_source
from admission.atlas_source import AtlasInputError, AtlasLimits
from admission.backends import get_backend

ACTOR = "atlas-importer"
COLUMNS = (
    "key",
    "tenant scope",
    "class",
    "CU",
    "budgets (tokens)",
    "rps/burst",
    "usage carried",
    "action",
    "CU derivation",
)


class Command(BaseCommand):
    help = "Import Atlas's per-key limits and usage as entitlements with period budgets (dry run unless --apply)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--redis-url", required=True, help="the Atlas Redis (redis://host:port/db)")
        parser.add_argument("--map", required=True, help="CSV api_key,tenant,project,model,region")
        parser.add_argument("--apply", action="store_true", help="write (default: print the diff only)")
        parser.add_argument("--actor", default=ACTOR, help=f"username the changes are audited as (default {ACTOR})")
        parser.add_argument("--default-daily", type=int, default=None, help="Atlas's default daily_limit (tokens)")
        parser.add_argument("--default-monthly", type=int, default=None, help="Atlas's default monthly_limit")
        parser.add_argument("--default-rate-per-sec", type=float, default=None, help="Atlas's default rate_per_sec")
        parser.add_argument("--default-burst", type=int, default=None, help="Atlas's default burst")
        parser.add_argument("--default-priority", default="normal", choices=atlas_source.PRIORITIES)

    def handle(self, *args: Any, **o: Any) -> None:
        for name in ("default_daily", "default_monthly", "default_burst"):
            if o[name] is not None and o[name] < 0:
                raise CommandError(f"--{name.replace('_', '-')}: must be ≥ 0")
        if o["default_rate_per_sec"] is not None and not o["default_rate_per_sec"] > 0:
            raise CommandError("--default-rate-per-sec: must be greater than 0")
        defaults = AtlasLimits(o["default_daily"], o["default_monthly"], o["default_rate_per_sec"], o["default_burst"],
                               o["default_priority"], from_defaults=True)  # fmt: skip
        try:
            text = Path(o["map"]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"--map: cannot read {o['map']}: {exc}") from None
        try:
            rows, problems = atlas_source.read_map(text)
        except AtlasInputError as exc:
            raise CommandError(str(exc)) from None
        client = redis.Redis.from_url(o["redis_url"], decode_responses=True, socket_timeout=5)
        now = datetime.now(UTC)
        try:
            atlas = atlas_source.read_atlas(client, [r.api_key for r in rows], now)
            unmapped = atlas_source.unmapped_keys(client, {r.api_key for r in rows})
        except (redis.RedisError, OSError) as exc:
            raise CommandError(f"--redis-url: cannot read Atlas's Redis: {exc}") from None
        finally:
            client.close()
        backend = get_backend()
        p = atlas_import.plan(rows, atlas, defaults, backend, problems, unmapped)
        if o["apply"]:
            atlas_import.apply(p, _actor(o["actor"]), backend)
        self.stdout.write(render(p, applied=o["apply"]))
        if p.problems:
            raise CommandError(f"{len(p.problems)} row(s) not imported (listed above); the others were "
                               + ("written" if o["apply"] else "planned"))  # fmt: skip


def _actor(username: str) -> Any:
    users = get_user_model()
    if username == ACTOR:
        user, _ = users.objects.get_or_create(username=ACTOR, defaults={"is_active": False})
        return user
    found = users.objects.filter(username=username).first()
    if found is None:
        raise CommandError(f"--actor: no user named '{username}'")
    return found


def rows_of(p: atlas_import.ImportPlan) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for k in p.keys:
        budgets = f"d {_n(k.daily_budget)} / m {_n(k.monthly_budget)}"
        rps = "-" if k.max_rps is None else f"{k.max_rps:g}/{k.burst}"
        action = k.action + (f" ({', '.join(k.changes)})" if k.changes else "")
        out.append((atlas_source.mask(k.api_key), k.scope, k.traffic_class, str(k.cu), budgets, rps,
                    atlas_import.carried(k), action, k.derivation))  # fmt: skip
    return out


def render(p: atlas_import.ImportPlan, *, applied: bool) -> str:
    rows = [COLUMNS, *rows_of(p)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip() for r in rows]
    counts = {a: sum(1 for k in p.keys if k.action == a) for a in ("create", "update", "unchanged")}
    lines.append(("applied: " if applied else "dry run (nothing written; --apply to write): ")
                 + ", ".join(f"{n} {a}" for a, n in counts.items()))  # fmt: skip
    for e in p.problems:
        lines.append(f"not imported: {e}")
    if p.unmapped:
        lines.append(f"in Atlas but not in the map (skipped): {', '.join(atlas_source.mask(k) for k in p.unmapped)}")
    return "\n".join(lines) + "\n"


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"
