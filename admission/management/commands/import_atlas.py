"""`manage.py import_atlas --redis-url URL --map FILE [--apply]`: bring Atlas's API keys over (issue 24.1).

A dry run by default: prints the diff (one line per scope the map sends keys to, each change old → new)
and writes nothing. An apply never lowers an existing entitlement's CU unless `--allow-lower` is given.
`--apply` writes the same diff through the entitlement services, audited with the importer as actor,
and carries today's and this month's usage into the period buckets: on Redis directly, on the embedded
default through the database to the web server's in-process store (admission.atlas_carry). The rules:
admission.atlas_import; what is read from Atlas and its defaults: admission.atlas_source.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from admission import atlas_carry, atlas_import, atlas_source
from admission.atlas_source import ATLAS_DEFAULTS, AtlasLimits
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
D = ATLAS_DEFAULTS


class Command(BaseCommand):
    help = "Import Atlas's per-key limits and usage as entitlements with period budgets (dry run unless --apply)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--redis-url", required=True, help="the Atlas Redis (redis://host:port/db)")
        parser.add_argument("--map", required=True, help="CSV api_key,tenant,project,model,region")
        parser.add_argument("--apply", action="store_true", help="write (default: print the diff only)")
        parser.add_argument("--allow-lower", action="store_true",
                            help="let --apply lower an existing entitlement's CU (refused otherwise)")  # fmt: skip
        parser.add_argument("--actor", default=ACTOR, help=f"username the changes are audited as (default {ACTOR})")
        # Atlas's own defaults (admission.atlas_source.ATLAS_DEFAULTS, from its gateway/config.py); set
        # these only for an Atlas deployed with other DEFAULT_* settings.
        parser.add_argument(
            "--default-daily", type=int, default=D.daily, help=f"Atlas's DEFAULT_DAILY_LIMIT ({D.daily:,})"
        )
        parser.add_argument("--default-monthly", type=int, default=D.monthly,
                            help=f"Atlas's DEFAULT_MONTHLY_LIMIT ({D.monthly:,})")  # fmt: skip
        parser.add_argument("--default-rate-per-sec", type=float, default=D.rate_per_sec,
                            help=f"Atlas's DEFAULT_RATE_PER_SEC ({D.rate_per_sec:g})")  # fmt: skip
        parser.add_argument("--default-burst", type=int, default=D.burst, help=f"Atlas's DEFAULT_BURST ({D.burst})")
        parser.add_argument("--default-priority", default=D.priority, choices=atlas_source.PRIORITIES,
                            help="priority of a key without one (Atlas: normal)")  # fmt: skip

    def handle(self, *args: Any, **o: Any) -> None:
        for name in ("default_daily", "default_monthly", "default_burst"):
            if o[name] is not None and o[name] < 0:
                raise CommandError(f"--{name.replace('_', '-')}: must be ≥ 0")
        if o["default_rate_per_sec"] is not None and not o["default_rate_per_sec"] > 0:
            raise CommandError("--default-rate-per-sec: must be greater than 0")
        defaults = AtlasLimits(o["default_daily"], o["default_monthly"], o["default_rate_per_sec"], o["default_burst"],
                               o["default_priority"], from_defaults=True)  # fmt: skip
        try:
            data = Path(o["map"]).read_bytes()
        except OSError as exc:
            raise CommandError(f"--map: cannot read {o['map']}: {exc}") from None
        rows, problems = atlas_source.read_map_file(data)
        # Bytes, not text: a key name Atlas stored that is not UTF-8 is reported, not a crash.
        client = redis.Redis.from_url(o["redis_url"], decode_responses=False, socket_timeout=5)
        now = datetime.now(UTC)
        try:
            atlas = atlas_source.read_atlas(client, [r.api_key for r in rows], now)
            unmapped, undecodable = atlas_source.unmapped_keys(client, {r.api_key for r in rows})
        except (redis.RedisError, OSError) as exc:
            raise CommandError(f"--redis-url: cannot read Atlas's Redis: {exc}") from None
        finally:
            client.close()
        backend = get_backend()
        p = atlas_import.plan(rows, atlas, defaults, backend, problems, unmapped)
        p.undecodable = undecodable
        if o["apply"]:
            atlas_import.apply(p, _actor(o["actor"]), backend, allow_lower=o["allow_lower"])
        self.stdout.write(render(p, applied=o["apply"], in_process=atlas_carry.in_process(backend)))
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
        action = k.action + (f" ({', '.join(k.change_words())})" if k.changes else "")
        out.append((k.keys_shown, k.scope, k.traffic_class, str(k.cu), budgets, rps,
                    atlas_import.carried(k), action, k.derivation))  # fmt: skip
    return out


def render(p: atlas_import.ImportPlan, *, applied: bool, in_process: bool = False) -> str:
    rows = [COLUMNS, *rows_of(p)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join([*(c.ljust(w) for c, w in zip(r, widths, strict=False)), r[-1]]).rstrip() for r in rows]
    for k in p.keys:
        lines += [f"  {k.keys_shown}: {n}" for n in k.notes]
    counts = {a: sum(1 for k in p.keys if k.action == a) for a in ("create", "update", "unchanged")}
    lines.append(("applied: " if applied else "dry run (nothing written; --apply to write): ")
                 + ", ".join(f"{n} {a}" for a, n in counts.items()))  # fmt: skip
    moved = sum(1 for k in p.keys for v in k.carried.values() if v)
    if applied and moved and in_process:
        lines.append(f"usage carried into {moved} period bucket(s) through the database (admission_carriedusage): "
                     "the admission store is the web server's own (no REDIS_URL); a running server adds it before "
                     "its next admission decision, a server started later when it starts")  # fmt: skip
    elif applied and moved:
        lines.append(f"usage carried into {moved} period bucket(s) of the admission store")
    elif applied:
        lines.append("usage carried: nothing new since the last import")
    for e in p.problems:
        lines.append(f"not imported: {e}")
    if p.unmapped:
        lines.append(f"in Atlas but not in the map (skipped): {', '.join(atlas_source.mask(k) for k in p.unmapped)}")
    if p.undecodable:
        lines.append(f"in Atlas with a key name that is not UTF-8, so no map can name it (skipped): "
                     f"{', '.join(atlas_source.mask(k) for k in p.undecodable)}")  # fmt: skip
    return "\n".join(lines) + "\n"


def _n(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"
