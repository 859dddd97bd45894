"""The incremental refresh of the snapshot's scopes (issue 35.2): which scopes a refresh reads again.

A refresh after a write re-sums only the scopes written since the previous one: those named by the
change log (admission.snapshot_triggers: every entitlement row's scope, appended in commit order)
plus those this process's own ORM saves named (signals: a PostgreSQL test transaction never
commits, so its log rows never appear). The scopes' groups are read again by
admission.scope_sums.read(t, scopes) and swapped into the held admission.scope_table.Table, which
derives them exactly as a full read would. The whole table is read again instead when it cannot
be trusted or would cost more piecemeal: the first load, the safety-net rebuild, counters that
went backwards (flushed), a log that was flushed, pruned past us or has a gap, an `everything` row
(a tenant, project or class write, or a bulk write), or more than MAX_SCOPES scopes at once.

Plans (admission.plans) are kept from the previous snapshot for every scope whose parameters are
the same object or equal and whose pool did not change (`kept_plans`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from admission import scope_sums, snapshot_triggers
from admission.scope_sums import IdKey, Sums
from admission.scope_table import Table
from admission.snapshot_types import PoolParams, ScopeParams, Snapshot

MAX_SCOPES = 256  # scopes one refresh re-sums by name; more, and one full read is cheaper


@dataclass
class Pending:
    """What one refresh read, applied once every read of the refresh has succeeded."""

    keys: set[IdKey] | None  # None: `sums` is a full read
    sums: Sums | None
    log_id: int


def lost(old: tuple[int, ...] | None, new: tuple[int, ...] | None) -> bool:
    """Counters only grow: gone or smaller means the table was flushed, and the log with it."""
    if old is None:
        return False
    return new is None or any(b < a for a, b in zip(old, new, strict=True))


class Scopes:
    """The held table and the newest change-log id it includes."""

    def __init__(self) -> None:
        self.table: Table | None = None
        self.log_id = 0

    def read(self, connection: Any, log_last: int, local: set[IdKey], t: datetime, *, full: bool) -> Pending:
        keys = None if full or self.table is None else self._since(connection, log_last, local)
        if keys is None:
            return Pending(None, scope_sums.read(t), log_last)
        if not keys:
            return Pending(set(), None, log_last)
        return Pending(keys, scope_sums.read(t, sorted(keys, key=repr)), log_last)

    def apply(self, p: Pending, ts: float) -> Table:
        if p.keys is None:
            assert p.sums is not None
            table = Table()
            table.load(p.sums, ts)
            self.table = table
        elif p.keys:
            assert self.table is not None and p.sums is not None
            self.table.replace(p.keys, p.sums, ts)
        self.log_id = p.log_id
        assert self.table is not None
        return self.table

    def _since(self, connection: Any, last: int, local: set[IdKey]) -> set[IdKey] | None:
        """The scopes logged after the held id up to `last`, with `local`; None: read everything."""
        held = self.log_id
        if last < held or last - held > 4 * MAX_SCOPES:
            return None
        rows = snapshot_triggers.changes(connection, held, last) if last > held else []
        # ids are handed out in commit order: a missing one was pruned or lost with a failed commit
        if len(rows) != last - held or any(r[1] for r in rows):
            return None
        keys = {(r[2], r[3], r[4], r[5], r[6]) for r in rows} | local
        return None if len(keys) > MAX_SCOPES else keys


def kept_plans(old: Snapshot, scopes: dict[Any, ScopeParams], pools: dict[int, PoolParams]) -> dict[Any, Any]:
    """The previous snapshot's plans that still hold: the scope's parameters the same (the table
    keeps an unchanged scope's object, so this is mostly an identity test) and its pool, and any
    pool its spillover reaches, unchanged."""
    moved = {pid for pid in old.pools.keys() | pools.keys() if old.pools.get(pid) != pools.get(pid)}
    by_name = {sp.key: sp for sp in scopes.values()}
    kept = {}
    for k, plan in list(old.plans.items()):
        sp = plan.params
        new = by_name.get(sp.key)
        if new is not sp and new != sp:
            continue
        spill = getattr(sp, "spillover", None)
        if moved and (sp.pool_id in moved or (spill is not None and spill.target_pool_id in moved)):
            continue
        kept[k] = plan
    return kept
